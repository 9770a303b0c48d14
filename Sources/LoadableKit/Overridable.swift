import Synchronization

/// A property of a loadable resource whose value can be set before the resource loads, and wins
/// over the value the load reads.
///
/// ArcGIS layers work this way: set `minScale` on a layer before it loads and the layer keeps your
/// value instead of the one in the service's metadata. The resource calls ``setLoadedValue(_:)``
/// when its metadata arrives; the app sets ``value``.
///
/// ```swift
/// final class FeatureLayer: AsyncLoadable<LayerInfo>, @unchecked Sendable {
///   let minScale = Overridable<Double>(0)
///   override func performLoad() async throws -> LayerInfo {
///     let info = try await service.layerInfo()
///     minScale.setLoadedValue(info.minScale)   // ignored for reading while overridden
///     return info
///   }
/// }
///
/// layer.minScale.value = 5_000                 // before load: wins over the service's value
/// try await layer.load()
/// layer.minScale.value                         // 5_000
/// ```
///
/// For an optional `Value`, setting `nil` is an override too; ``removeOverride()`` goes back to
/// the loaded (or default) value.
public final class Overridable<Value: Sendable>: Sendable {
  private struct Storage {
    var defaultValue: Value
    var loaded: Value?
    var override: Value?
    var isOverridden = false
  }

  private let storage: Mutex<Storage>

  /// Creates a property with the value it has before anything is loaded or set.
  public init(_ defaultValue: Value) {
    storage = Mutex(Storage(defaultValue: defaultValue))
  }

  /// The override if there is one, else the loaded value if there is one, else the default.
  /// Setting it overrides.
  public var value: Value {
    get {
      storage.withLock(owner: self) { storage in
        if storage.isOverridden, let value = storage.override { return value }
        return storage.loaded ?? storage.defaultValue
      }
    }
    set {
      // The replaced value is returned so it is destroyed after the lock: its deinit is user code.
      _ = storage.withLock(owner: self) { storage -> Value? in
        defer {
          storage.override = newValue
          storage.isOverridden = true
        }
        return storage.override
      }
    }
  }

  /// Whether a value set through ``value`` is in effect.
  public var isOverridden: Bool { storage.withLock(owner: self) { $0.isOverridden } }

  /// The value the resource read when it loaded, if it has; kept even while overridden.
  public var loadedValue: Value? { storage.withLock(owner: self) { $0.loaded } }

  /// Records the value the resource read from its source. It does not replace an override.
  public func setLoadedValue(_ value: Value) {
    _ = storage.withLock(owner: self) { storage -> Value? in
      defer { storage.loaded = value }
      return storage.loaded
    }
  }

  /// Drops the override, so ``value`` is the loaded value (or the default) again.
  public func removeOverride() {
    _ = storage.withLock(owner: self) { storage -> Value? in
      defer {
        storage.override = nil
        storage.isOverridden = false
      }
      return storage.override
    }
  }
}
