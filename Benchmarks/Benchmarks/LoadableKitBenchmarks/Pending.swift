// Benchmarks for parts of LoadableKit that have not landed on `main` yet. Each stays a no-op
// until its API exists; README.md lists them as pending.

/// 5. ContentLoader: claim begin+end on a loaded key, 500 vs 5,000-key churn — PENDING:
/// `ContentLoader` is not in LoadableKit yet.
func registerContentLoaderBenchmarks() {}
