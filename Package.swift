// swift-tools-version: 6.2
// Tools 6.2 is required for `nonisolated(nonsending)` on the async API (SPEC §1).
import PackageDescription

let package = Package(
  name: "swift-loadable",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "LoadableKit", targets: ["LoadableKit"]),
    .library(name: "LoadableKitTesting", targets: ["LoadableKitTesting"]),
    // The playgrounds' simulated services, for the HTTP server in Server/ that serves them.
    .library(name: "ExampleServices", targets: ["ExampleServices"]),
  ],
  targets: [
    .target(name: "LoadableKit"),
    .target(name: "LoadableKitTesting", dependencies: ["LoadableKit"]),
    .testTarget(
      name: "LoadableKitTests",
      dependencies: [
        "LoadableKit", "LoadableKitTesting", "QuickStart", "MapViewer", "Pipelines", "Geocode", "OfflineMapJob",
        "Thumbnails", "ServerJobs", "PagedSearch", "ExampleServices", "JobCrashChild", "TestProcessGuard",
      ]
    ),
    // Linked into the test binary: ends it when the `swift test` that started it is gone.
    .target(name: "TestProcessGuard", path: "Tests/TestProcessGuard"),
    // The child process of the JobManager crash test: runs jobs until the test kills it.
    .executableTarget(name: "JobCrashChild", dependencies: ["LoadableKit"], path: "Tests/JobCrashChild"),

    // Playgrounds: example executables, `swift run <Name>`. They use only LoadableKit's public API.
    .executableTarget(name: "QuickStart", dependencies: ["LoadableKit"], path: "Playgrounds/QuickStart"),
    .executableTarget(
      name: "PagedSearch", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/PagedSearch",
      exclude: ["README.md"]),
    .executableTarget(
      name: "MapViewer", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/MapViewer",
      exclude: ["README.md"]),
    .executableTarget(
      name: "Pipelines", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/Pipelines",
      exclude: ["README.md"]),
    .executableTarget(
      name: "Geocode", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/Geocode",
      exclude: ["README.md"]),
    .executableTarget(
      name: "OfflineMapJob", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/OfflineMapJob",
      exclude: ["README.md"]),
    .executableTarget(
      name: "Thumbnails", dependencies: ["LoadableKit", "LoadableKitTesting", "ExampleServices"], path: "Playgrounds/Thumbnails",
      exclude: ["README.md"]),
    .executableTarget(
      name: "ServerJobs", dependencies: ["LoadableKit", "ExampleServices"], path: "Playgrounds/ServerJobs",
      exclude: ["README.md"]),
    // The playgrounds' simulated services (latency, outages) over the JSON files in its Data/.
    .target(
      name: "ExampleServices", dependencies: ["LoadableKit"], path: "Playgrounds/ExampleServices",
      exclude: ["Data"]),
  ],
  swiftLanguageModes: [.v6]
)
