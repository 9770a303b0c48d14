// swift-tools-version: 6.2
// An HTTP server for the playgrounds' example services, in its own package so the root package
// stays dependency-free. Run: swift run --package-path Server example-server --port 8080
import PackageDescription

let package = Package(
  name: "example-server",
  platforms: [.macOS(.v15)],
  dependencies: [
    .package(name: "swift-loadable", path: "../"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
  ],
  targets: [
    // The routes, the staging (latency, outages, held requests) and the request log.
    .target(
      name: "ExampleServer",
      dependencies: [
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "ExampleServices", package: "swift-loadable"),
      ]
    ),
    .executableTarget(name: "example-server", dependencies: ["ExampleServer"]),
    .testTarget(
      name: "ExampleServerTests",
      dependencies: [
        "ExampleServer",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "LoadableKit", package: "swift-loadable"),
        .product(name: "ExampleServices", package: "swift-loadable"),
      ]
    ),
  ],
  swiftLanguageModes: [.v6]
)
