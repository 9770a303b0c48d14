import Foundation

/// A rectangle in longitude and latitude (WGS 84): an area to take offline.
public struct Extent: Codable, Sendable, Hashable {
  public var xmin: Double
  public var ymin: Double
  public var xmax: Double
  public var ymax: Double

  public init(xmin: Double, ymin: Double, xmax: Double, ymax: Double) {
    self.xmin = xmin
    self.ymin = ymin
    self.xmax = xmax
    self.ymax = ymax
  }
}

/// One tile of a tiled map service, in the Web Mercator tiling scheme that ArcGIS basemaps use:
/// level 0 is the world in one tile, each level splits every tile in four, rows count from the
/// top and columns from longitude −180°.
public struct TileKey: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
  public var level: Int
  public var row: Int
  public var column: Int

  public init(level: Int, row: Int, column: Int) {
    self.level = level
    self.row = row
    self.column = column
  }

  /// The tile that contains `point` at `level`.
  public init(containing point: Point, level: Int) {
    let tiles = Double(1 << level)
    let latitude = min(max(point.y, -85.051_128), 85.051_128) * .pi / 180
    let x = (point.x + 180) / 360 * tiles
    let y = (1 - log(tan(latitude) + 1 / cos(latitude)) / .pi) / 2 * tiles
    let last = (1 << level) - 1
    self.init(level: level, row: min(max(Int(y), 0), last), column: min(max(Int(x), 0), last))
  }

  /// The tiles that cover `extent` at each of `levels`: level by level, then row by row.
  public static func covering(_ extent: Extent, levels: ClosedRange<Int>) -> [TileKey] {
    levels.flatMap { level in
      let topLeft = TileKey(containing: Point(x: extent.xmin, y: extent.ymax), level: level)
      let bottomRight = TileKey(containing: Point(x: extent.xmax, y: extent.ymin), level: level)
      return (topLeft.row...bottomRight.row).flatMap { row in
        (topLeft.column...bottomRight.column).map { TileKey(level: level, row: row, column: $0) }
      }
    }
  }

  /// `level/row/column`, as in a tile request's path.
  public var description: String { "\(level)/\(row)/\(column)" }

  public static func < (lhs: TileKey, rhs: TileKey) -> Bool {
    (lhs.level, lhs.row, lhs.column) < (rhs.level, rhs.row, rhs.column)
  }

  /// The bytes a simulated tile service sends for this tile: a stand-in for a 256 × 256 image,
  /// the same on every request — a line naming the tile, then 256 pseudo-random bytes.
  func simulatedImage(of service: String) -> Data {
    var data = Data("\(service) tile \(self)\n".utf8)
    var state = UInt64(level) << 48 ^ UInt64(row) << 24 ^ UInt64(column)
    for _ in 0..<32 {
      withUnsafeBytes(of: splitMix64(&state).littleEndian) { data.append(contentsOf: $0) }  // 8 bytes per step
    }
    return data
  }
}

/// The next 64 pseudo-random bits of SplitMix64 from `state`, which it advances: the same on
/// every run for the same start.
func splitMix64(_ state: inout UInt64) -> UInt64 {
  state &+= 0x9E37_79B9_7F4A_7C15
  var z = state
  z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
  z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
  return z ^ (z >> 31)
}
