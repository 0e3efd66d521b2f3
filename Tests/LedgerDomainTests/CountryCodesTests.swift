import LedgerDomain
import Testing

@Suite struct CountryCodesTests {
    @Test(arguments: [
        ("USA", "US"), ("GBR", "GB"), ("DEU", "DE"), ("FRA", "FR"), ("JPN", "JP"), ("CHN", "CN"), ("KOR", "KR"), ("BRA", "BR"),
        ("IND", "IN"), ("AUS", "AU"), ("CAN", "CA"), ("CHE", "CH"), ("TWN", "TW"), ("HKG", "HK"), ("ARE", "AE"), ("ZAF", "ZA"),
        ("SSD", "SS"), ("CUW", "CW"), ("ALA", "AX"), ("ATA", "AQ"),
    ])
    func mapsAStorefrontsAlpha3ToAlpha2AndBack(alpha3: String, alpha2: String) {
        #expect(CountryCodes.alpha2(fromAlpha3: alpha3) == alpha2)
        #expect(CountryCodes.alpha3(fromAlpha2: alpha2) == alpha3)
    }

    @Test func holdsTheOfficiallyAssignedCodesEachOnceAndBothWaysAlike() {
        let all = CountryCodes.all
        #expect(all.count == 249)
        #expect(Set(all.map(\.alpha2)).count == 249)
        #expect(Set(all.map(\.alpha3)).count == 249)
        for (alpha2, alpha3) in all {
            #expect(alpha2.count == 2 && alpha2.allSatisfy { $0.isASCII && $0.isUppercase }, "\(alpha2)")
            #expect(alpha3.count == 3 && alpha3.allSatisfy { $0.isASCII && $0.isUppercase }, "\(alpha3)")
            #expect(CountryCodes.alpha3(fromAlpha2: alpha2) == alpha3)
            #expect(CountryCodes.alpha2(fromAlpha3: alpha3) == alpha2)
        }
        #expect(all.map(\.alpha2) == all.map(\.alpha2).sorted())
    }

    @Test(arguments: ["usa", "us", "", "U", "UK", "XK", "XKX", "EU", "EUR", "ANT", "AN", "USA ", "ZZZ"])
    func answersNilForWhatIsNotAnAssignedCode(code: String) {
        #expect(CountryCodes.alpha2(fromAlpha3: code) == nil)
        #expect(CountryCodes.alpha3(fromAlpha2: code) == nil)
    }
}
