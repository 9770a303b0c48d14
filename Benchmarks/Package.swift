// swift-tools-version: 6.1
// The benchmarks live in their own package so the root package stays dependency-free.
// Run: swift package --package-path Benchmarks benchmark   (or Benchmarks/compare.sh for ratios)
import PackageDescription

let package = Package(
  name: "benchmarks",
  platforms: [.macOS(.v15)],
  dependencies: [
    .package(name: "swift-loadable", path: "../"),
    .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
  ],
  targets: [
    .executableTarget(
      name: "LoadableKitBenchmarks",
      dependencies: [
        .product(name: "Benchmark", package: "benchmark"),
        .product(name: "LoadableKit", package: "swift-loadable"),
      ],
      path: "Benchmarks/LoadableKitBenchmarks",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
    .executableTarget(
      name: "loadable-profile",
      dependencies: [.product(name: "LoadableKit", package: "swift-loadable")],
      path: "Tools/Profile"
    ),
  ],
  swiftLanguageModes: [.v6]
)
