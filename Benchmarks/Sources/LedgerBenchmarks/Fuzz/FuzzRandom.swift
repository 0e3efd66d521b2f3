import LedgerTesting

/// The fuzzer's random numbers: SplitMix64, small and the same on every platform, so a seed names
/// a run exactly (the system generator is neither seedable nor stable across versions).
///
/// Each case draws from a generator of its own, derived from the run's seed and the case's index,
/// so case 7,412 of a run can be made again without making the 7,411 before it.
public struct FuzzRandom: RandomNumberGenerator, Sendable {
    private var mixer: SplitMix

    public init(seed: UInt64) {
        mixer = SplitMix(seed: seed)
    }

    /// The generator of case `index` of the run seeded with `seed`.
    public init(seed: UInt64, case index: Int) {
        var seeding = SplitMix(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03))
        mixer = SplitMix(seed: seeding.next())
    }

    public mutating func next() -> UInt64 {
        mixer.next()
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
