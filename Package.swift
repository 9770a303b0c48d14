// swift-tools-version: 6.2
// Tools 6.2 is required for `nonisolated(nonsending)` on the async API (SPEC §1).
import PackageDescription

let package = Package(
  name: "swift-loadable",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "LoadableKit", targets: ["LoadableKit"]),
    .library(name: "LoadableKitTesting", targets: ["LoadableKitTesting"]),
  ],
  targets: [
    .target(name: "LoadableKit"),
    .target(name: "LoadableKitTesting", dependencies: ["LoadableKit"]),
    .testTarget(
      name: "LoadableKitTests",
      dependencies: ["LoadableKit", "LoadableKitTesting", "QuickStart"]
    ),
    .executableTarget(name: "QuickStart", dependencies: ["LoadableKit"], path: "Playgrounds/QuickStart"),
  ],
  swiftLanguageModes: [.v6]
)
