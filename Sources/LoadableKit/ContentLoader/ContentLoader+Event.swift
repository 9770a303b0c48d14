extension ContentLoader {
  /// A change to one of a loader's keys, as delivered by ``ContentLoader/events``.
  ///
  /// Events are the delegate-style view of a loader: one stream tells about every key. They are
  /// delivered in the order the changes happened, one per change, never merged (but a load
  /// cancelled and another started at once, before the loader read the key: see
  /// <doc:LoadingKeyedContent>).
  ///
  /// ```swift
  /// for await event in loader.events {
  ///   switch event {
  ///   case .loadingWithPriorValue(let key, let value, _): show(value, placeholderFor: key)
  ///   case .loaded(let key, let value, _): show(value, for: key)
  ///   case .failed(let key, let error): showError(error, for: key)
  ///   case .loading, .cancelled, .evicted: break
  ///   }
  /// }
  /// ```
  public enum Event: Sendable {
    /// A load of the key started, and there is no value to show meanwhile.
    case loading(Key)
    /// A load of the key started, and this value — supplied by the data source's `existingValue`
    /// hook or loaded earlier — is shown meanwhile.
    case loadingWithPriorValue(Key, Value, Version)
    /// A load of the key finished; the key now holds this value and version.
    ///
    /// When the load's result was not newer than the value already held, the result is dropped
    /// and this event carries the value that was kept.
    case loaded(Key, Value, Version)
    /// A load of the key failed with this error. The key keeps the value it had.
    case failed(Key, any Error)
    /// The key's load was cancelled because nobody needed it any more. The key goes back to the
    /// status it had before that load.
    case cancelled(Key)
    /// The key's idle entry was removed, and with it its value.
    case evicted(Key)

    /// The key the event is about.
    public var key: Key {
      switch self {
      case .loading(let key), .loadingWithPriorValue(let key, _, _), .loaded(let key, _, _),
        .failed(let key, _), .cancelled(let key), .evicted(let key):
        key
      }
    }
  }
}

extension ContentLoader.Event: CustomStringConvertible {
  /// The case and its payload, for logs and tests.
  public var description: String {
    switch self {
    case .loading(let key): "loading(\(key))"
    case .loadingWithPriorValue(let key, let value, let version): "loadingWithPriorValue(\(key), \(value), \(version))"
    case .loaded(let key, let value, let version): "loaded(\(key), \(value), \(version))"
    case .failed(let key, let error): "failed(\(key), \(error))"
    case .cancelled(let key): "cancelled(\(key))"
    case .evicted(let key): "evicted(\(key))"
    }
  }
}
