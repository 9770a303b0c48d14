// swift-tools-version: 6.2
// Adapters from LoadableKit's instrument hook (`LoadInstrument`) to the server-side Swift
// observability APIs. A package of its own, like Benchmarks/, so the library stays dependency-free.
// Test: swift test --package-path Integrations
import PackageDescription

let package = Package(
  name: "loadablekit-integrations",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "LoadableKitTracing", targets: ["LoadableKitTracing"]),
    .library(name: "LoadableKitMetrics", targets: ["LoadableKitMetrics"]),
    .library(name: "LoadableKitLogging", targets: ["LoadableKitLogging"]),
  ],
  dependencies: [
    .package(name: "swift-loadable", path: "../"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    .target(
      name: "LoadableKitTracing",
      dependencies: [
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
      ]
    ),
    .target(
      name: "LoadableKitMetrics",
      dependencies: [
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ]
    ),
    .target(
      name: "LoadableKitLogging",
      dependencies: [
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .testTarget(
      name: "LoadableKitIntegrationsTests",
      dependencies: [
        "LoadableKitTracing", "LoadableKitMetrics", "LoadableKitLogging",
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "LoadableKitTesting", package: "swift-loadable"),
        .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "InMemoryLogging", package: "swift-log"),
      ]
    ),
  ],
  swiftLanguageModes: [.v6]
)
