/// The fuzzer's random numbers: SplitMix64, small and the same on every platform, so a seed names
/// a run exactly (the system generator is neither seedable nor stable across versions).
///
/// Each case draws from a generator of its own, derived from the run's seed and the case's index,
/// so case 7,412 of a run can be made again without making the 7,411 before it.
public struct FuzzRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    /// The generator of case `index` of the run seeded with `seed`.
    public init(seed: UInt64, case index: Int) {
        var mixer = FuzzRandom(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03))
        state = mixer.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `percent` / 100.
    public mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &self) < percent
    }

    /// An element of a non-empty array.
    public mutating func pick<Element>(_ elements: [Element]) -> Element {
        elements[Int.random(in: 0..<elements.count, using: &self)]
    }
}
