// swift-tools-version:6.1
import PackageDescription

/// One set of settings for every target.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "purchase-ledger",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ledger", targets: ["ledger"])
    ],
    dependencies: [
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
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
                "LedgerDomain",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerStore",
            dependencies: [
                "LedgerDomain",
                "LedgerApplication",
                "LedgerMigrations",
                "LedgerProjections",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LocalPostgres",
            dependencies: [
                "LedgerApplication",
                "LedgerStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppStore",
            dependencies: [
                "LedgerDomain",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "AppStore",
                "LedgerDomain",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerHTTP",
            dependencies: [
                "LedgerDomain",
                "LedgerApplication",
                "LedgerStore",
                "LedgerProjections",
                "AppStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerDemo",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LedgerBenchmarks",
            dependencies: [
                "LedgerDomain",
                "LedgerApplication",
                "LedgerStore",
                "LedgerProjections",
                "LedgerDemo",
                "AppStore",
                "AppStoreSimulator",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/Sources/LedgerBenchmarks",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ledger",
            dependencies: [
                "LedgerDomain",
                "LedgerApplication",
                "LedgerStore",
                "LocalPostgres",
                "LedgerHTTP",
                "LedgerProjections",
                "LedgerDemo",
                "LedgerBenchmarks",
                "AppStore",
                "AppStoreSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Tests, by tier: pure, application (in-memory store), PostgreSQL, HTTP router, end to end

        .target(
            name: "LedgerTesting",
            dependencies: [
                "LedgerDomain",
                "LedgerApplication",
                "LedgerStore",
                "LocalPostgres",
                "LedgerHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/LedgerTesting",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerDomainTests",
            dependencies: ["LedgerDomain"],
            resources: [.copy("Golden")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerProjectionsTests",
            dependencies: ["LedgerProjections", "LedgerDomain"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerApplicationTests",
            dependencies: [
                "LedgerApplication",
                "LedgerDomain",
                "LedgerTesting",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreTests",
            dependencies: [
                "AppStore",
                "LedgerTesting",
                "LedgerDomain",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreSimulatorTests",
            dependencies: [
                "AppStore",
                "AppStoreSimulator",
                "LedgerTesting",
                "LedgerDomain",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerStoreTests",
            dependencies: [
                "LedgerTesting",
                "LedgerApplication",
                "LedgerStore",
                "LedgerDomain",
                "LedgerProjections",
                "LedgerBenchmarks",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerHTTPTests",
            dependencies: [
                "LedgerHTTP",
                "AppStore",
                "LedgerTesting",
                "LedgerDomain",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerEndToEndTests",
            dependencies: [
                "LedgerHTTP",
                "LedgerApplication",
                "LedgerStore",
                "LedgerDomain",
                "LedgerTesting",
                "LedgerDemo",
                "LedgerProjections",
                "AppStore",
                "AppStoreSimulator",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerBenchmarksTests",
            dependencies: [
                "LedgerBenchmarks",
                "LedgerTesting",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/Tests/LedgerBenchmarksTests",
            swiftSettings: swiftSettings
        ),
    ]
)
