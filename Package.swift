// swift-tools-version:6.1
import PackageDescription

/// One set of settings for every target.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The products of the packages above, by the names the targets use.
extension Target.Dependency {
    static let argumentParser = product(name: "ArgumentParser", package: "swift-argument-parser")
    static let asyncHTTPClient = product(name: "AsyncHTTPClient", package: "async-http-client")
    static let crypto = product(name: "Crypto", package: "swift-crypto")
    static let asn1 = product(name: "SwiftASN1", package: "swift-asn1")
    static let x509 = product(name: "X509", package: "swift-certificates")
    static let hummingbird = product(name: "Hummingbird", package: "hummingbird")
    static let hummingbirdTesting = product(name: "HummingbirdTesting", package: "hummingbird")
    static let logging = product(name: "Logging", package: "swift-log")
    static let metrics = product(name: "Metrics", package: "swift-metrics")
    static let nioCore = product(name: "NIOCore", package: "swift-nio")
    static let nioHTTP1 = product(name: "NIOHTTP1", package: "swift-nio")
    static let nioPosix = product(name: "NIOPosix", package: "swift-nio")
    static let nioSSL = product(name: "NIOSSL", package: "swift-nio-ssl")
    static let postgresNIO = product(name: "PostgresNIO", package: "postgres-nio")
    static let prometheus = product(name: "Prometheus", package: "swift-prometheus")
    static let serviceLifecycle = product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
    static let unixSignals = product(name: "UnixSignals", package: "swift-service-lifecycle")
}

let package = Package(
    name: "purchase-ledger",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ledger", targets: ["ledger"]),
        .executable(name: "ledger-bench", targets: ["ledger-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // MARK: The ledger

        .target(
            name: "LedgerDomain",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerMigrations",
            path: "Migrations",
            resources: [.copy("sql")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerProjections",
            dependencies: ["LedgerDomain"],
            path: "Projections",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerApplication",
            dependencies: [
                "LedgerDomain", "LedgerProjections", .crypto, .logging, .metrics,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerStore",
            dependencies: [
                "LedgerDomain", "LedgerApplication", "LedgerMigrations", "LedgerProjections", .postgresNIO,
                .logging, .crypto, .nioCore, .nioPosix, .nioSSL, .serviceLifecycle, .metrics,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LocalPostgres",
            dependencies: [
                "LedgerApplication", "LedgerStore", .postgresNIO, .logging, .crypto,
            ],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .target(
            name: "AppStore",
            dependencies: [
                "LedgerDomain", "LedgerApplication", "CZlib", .asyncHTTPClient, .crypto, .asn1, .x509, .logging, .nioCore, .nioHTTP1, .metrics,
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "AppStore", "LedgerDomain", .crypto, .asn1, .x509, .hummingbird, .logging, .serviceLifecycle, .asyncHTTPClient, .nioCore, .nioHTTP1,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerHTTP",
            dependencies: [
                "LedgerDomain", "LedgerApplication", "LedgerProjections", "AppStore",
                .hummingbird, .logging, .metrics, .prometheus, .crypto, .nioCore, .nioHTTP1,
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerRuntime",
            dependencies: [
                "AppStore", "LedgerApplication", "LedgerDomain", "LedgerHTTP", "LedgerStore",
                .asyncHTTPClient, .logging, .nioCore, .nioPosix, .serviceLifecycle, .unixSignals,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerDemo",
            dependencies: [
                "AppStore", "LedgerApplication", "LedgerDomain", "LedgerProjections", "LedgerStore",
                .asyncHTTPClient, .hummingbird, .logging, .nioCore, .nioHTTP1, .postgresNIO,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerCommandLine",
            dependencies: [
                "AppStore", "LedgerApplication", "LedgerDomain", "LedgerHTTP", "LedgerRuntime", "LedgerStore", "LocalPostgres",
                .argumentParser, .logging, .nioCore, .postgresNIO,
            ],
            swiftSettings: swiftSettings
        ),
        // What ships: production code only (no test support, benchmarks or fuzzer).
        .executableTarget(
            name: "ledger",
            dependencies: [
                "LedgerDomain", "LedgerApplication", "LedgerStore", "LocalPostgres", "LedgerHTTP", "LedgerRuntime", "LedgerCommandLine",
                "LedgerProjections", "LedgerDemo", "AppStore", "AppStoreSimulator",
                .argumentParser, .asyncHTTPClient, .nioCore, .nioHTTP1, .logging, .serviceLifecycle, .unixSignals,
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Benchmarks, the seeder and the fuzzer: `swift run -c release ledger-bench`, never shipped

        .target(
            name: "LedgerBenchmarks",
            dependencies: [
                "LedgerDomain", "LedgerApplication", "LedgerStore", "LedgerProjections", "LedgerHTTP", "LedgerRuntime", "LedgerTesting",
                "AppStore", "AppStoreSimulator", .asyncHTTPClient, .crypto, .x509, .hummingbird, .logging, .nioCore, .nioHTTP1,
                .postgresNIO, .serviceLifecycle,
            ],
            path: "Benchmarks/Sources/LedgerBenchmarks",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ledger-bench",
            dependencies: [
                "LedgerBenchmarks", "LedgerTesting", "LedgerCommandLine", "LedgerRuntime", "LedgerHTTP", "LedgerStore", "LocalPostgres",
                "LedgerDemo", "LedgerDomain", "LedgerApplication", "AppStore", "AppStoreSimulator",
                .argumentParser, .asyncHTTPClient, .logging, .nioCore, .nioHTTP1, .postgresNIO, .serviceLifecycle, .unixSignals,
            ],
            path: "Benchmarks/Sources/ledger-bench",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests, by tier: pure, application (in-memory store), PostgreSQL, HTTP router, end to end

        .target(
            name: "LedgerTesting",
            dependencies: [
                "LedgerDomain", "LedgerDomainTesting", "LedgerApplication", "LedgerStore", "LedgerProjections", "LocalPostgres", "LedgerHTTP",
                "LedgerRuntime", "AppStore",
                .asyncHTTPClient, .crypto, .prometheus, .nioCore, .nioHTTP1, .postgresNIO, .logging,
                .serviceLifecycle,
            ],
            path: "Tests/LedgerTesting",
            swiftSettings: swiftSettings
        ),
        // App Store answers for tests, with no dependency beyond the domain.
        .target(
            name: "LedgerDomainTesting",
            dependencies: ["LedgerDomain"],
            path: "Tests/LedgerDomainTesting",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerDomainTests",
            dependencies: ["LedgerDomain", "LedgerDomainTesting"],
            resources: [.copy("Golden")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerProjectionsTests",
            dependencies: ["LedgerProjections", "LedgerDomain", "LedgerDomainTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerApplicationTests",
            dependencies: [
                "LedgerApplication", "LedgerDomain", "LedgerTesting", .logging,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreTests",
            dependencies: [
                "AppStore", "LedgerTesting", "LedgerDomain", "LedgerRuntime", .asyncHTTPClient, .crypto, .hummingbird, .logging,
                .nioCore, .nioHTTP1, .serviceLifecycle,
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreSimulatorTests",
            dependencies: [
                "AppStore", "AppStoreSimulator", "LedgerTesting", "LedgerDomain", "LedgerRuntime", .crypto, .x509, .hummingbird, .logging,
                .nioHTTP1, .serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerStoreTests",
            dependencies: [
                "LedgerTesting", "LedgerApplication", "LedgerStore", "LedgerDomain", "LedgerDomainTesting", "LedgerProjections", "LocalPostgres", .postgresNIO, .logging, .crypto, .nioCore, .nioPosix, .nioSSL,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerHTTPTests",
            dependencies: [
                "LedgerHTTP", "LedgerStore", "LedgerApplication", "LedgerProjections", "AppStore", "AppStoreSimulator", "LedgerTesting",
                "LedgerRuntime", "LedgerDomain", .hummingbird, .hummingbirdTesting, .nioCore, .logging, .metrics, .prometheus,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerEndToEndTests",
            dependencies: [
                "LedgerHTTP", "LedgerApplication", "LedgerStore", "LedgerDomain", "LedgerDomainTesting", "LedgerTesting", "LedgerRuntime",
                "LedgerDemo", "LedgerProjections", "AppStore", "AppStoreSimulator", "LocalPostgres", .asyncHTTPClient,
                .hummingbird, .hummingbirdTesting, .postgresNIO, .logging, .nioCore, .nioHTTP1,
                .serviceLifecycle, .prometheus, .crypto, .x509,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerBenchmarksTests",
            dependencies: [
                "LedgerBenchmarks", "LedgerTesting", "AppStore", .logging, .nioHTTP1,
            ],
            path: "Benchmarks/Tests/LedgerBenchmarksTests",
            swiftSettings: swiftSettings
        ),
    ]
)
