import LoadableKit
import Testing

@Test func loadsOnce() async throws {
  let loadable = AsyncLoadable { 42 }
  try await loadable.load()
  #expect(loadable.content == 42)
}
