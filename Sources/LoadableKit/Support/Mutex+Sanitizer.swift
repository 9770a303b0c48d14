import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// ThreadSanitizer's happens-before annotations, looked up once at run time.
///
/// `Synchronization.Mutex` locks with futexes inside the standard library, which is not built with
/// the sanitizer, so ThreadSanitizer cannot see that two critical sections are ordered and reports
/// every access to a mutex-protected value as a race. ``Mutex/withLock(owner:_:)`` tells it: after
/// the lock is taken it *acquires* the owner's address, and before the lock is released it
/// *releases* it. Without the sanitizer the symbols are absent, and the lock is taken as it is,
/// after one check.
@usableFromInline
enum SanitizerAnnotations {
  @usableFromInline typealias Annotation = @convention(c) (UnsafeRawPointer?) -> Void

  /// Both annotations, or `nil` without the sanitizer. Lazily initialized: each read is a
  /// `swift_once` check, so a lock reads ``isActive`` first.
  @usableFromInline static let hooks: (acquire: Annotation, release: Annotation)? = {
    guard let acquire = lookup("__tsan_acquire"), let release = lookup("__tsan_release") else { return nil }
    return (acquire, release)
  }()

  /// Whether ``hooks`` were found: `0` before the first look, then `1` (absent) or `2`. An atomic
  /// is initialized statically, so reading it is one load; `hooks` cost a `swift_once` call a
  /// lock, some 25 a `map` node's load.
  @usableFromInline static let presence = Atomic<UInt8>(0)

  /// Whether the sanitizer's annotations are present.
  @inlinable @inline(__always) static var isActive: Bool {
    switch presence.load(ordering: .relaxed) {
    case 1: false
    case 2: true
    default: lookUp()
    }
  }

  @usableFromInline @inline(never) static func lookUp() -> Bool {
    let found = hooks != nil
    presence.store(found ? 2 : 1, ordering: .relaxed)
    return found
  }

  private static func lookup(_ name: String) -> Annotation? {
    #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
      #if canImport(Darwin)
        let handle = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
      #else
        let handle: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
      #endif
      return dlsym(handle, name).map { unsafeBitCast($0, to: Annotation.self) }
    #else
      return nil
    #endif
  }
}

extension Mutex where Value: ~Copyable {
  /// `withLock(_:)`, with the critical section made visible to ThreadSanitizer.
  ///
  /// - Parameter owner: the object that owns the mutex; its address names the critical section.
  ///
  /// Always inlined: called out of line from generic code, it would be handed the metadata of
  /// `Mutex<Value>`, which the caller looks up at run time (issue 13); inlined, a `Value` whose
  /// layout is known needs none.
  @inlinable @inline(__always)
  package borrowing func withLock<Result>(
    owner: AnyObject, _ body: (inout sending Value) throws -> sending Result
  ) rethrows -> sending Result {
    guard SanitizerAnnotations.isActive, let hooks = SanitizerAnnotations.hooks else { return try withLock(body) }
    let address = UnsafeRawPointer(Unmanaged.passUnretained(owner).toOpaque())
    return try withLock { value in
      hooks.acquire(address)
      defer { hooks.release(address) }
      return try body(&value)
    }
  }
}
