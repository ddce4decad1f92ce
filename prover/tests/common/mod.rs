//! Helpers for the prover's tests. The references (a naive `O(n^2)` coset LDE in `u128 % p`
//! arithmetic, a naive index transpose, leaf hashing with the `sha3` / `blake3` crates, a
//! recursive Merkle root) are `conformance::reference`'s, which calls neither the prover nor
//! backend-api's math.

// Each test file uses a part of this module.
#![allow(dead_code, unused_imports)]

pub use conformance::reference::{P, coset_lde as naive_lde, leaf_digests, merkle_root, transpose};

/// Runs the `prover` binary with `args`.
pub fn prover(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_prover")).args(args).output().expect("run the prover binary")
}

/// A run's stdout and stderr, as text.
pub fn text(out: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A temporary path as a command-line argument.
pub fn path_str(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Lower-case hex of a digest, written out here so the CLI's hex output is not checked against
/// `backend_api::hex`.
pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Seeded values with the edge cases mixed in: 0, 1, p - 1, p, p + 1, u64::MAX.
pub fn values(len: usize, seed: u64) -> Vec<u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let edges = [0, 1, P - 1, P, P + 1, u64::MAX];
    (0..len).map(|i| if i % 5 == 0 { edges[(i / 5) % edges.len()] } else { rng.random::<u64>() }).collect()
}

/// A fresh empty directory for one test, removed with all it holds when dropped (also when the
/// test fails): `tempfile`'s private (0700) directory with an unpredictable name under the
/// system's temporary directory, so a run leaves nothing there and follows nothing another user
/// planted. Derefs to its path.
pub struct TestDir(tempfile::TempDir);

impl std::ops::Deref for TestDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::path::Path> for TestDir {
    fn as_ref(&self) -> &std::path::Path {
        self.0.path()
    }
}

/// A fresh empty directory for one test, named after it ([`TestDir`]).
pub fn temp_dir(name: &str) -> TestDir {
    TestDir(tempfile::Builder::new().prefix(&format!("prover-test-{name}-")).tempdir().expect("temp dir"))
}

pub fn write_u64s(path: &std::path::Path, data: &[u64]) {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write trace");
}

pub fn read_u64s(path: &std::path::Path) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read output");
    assert_eq!(bytes.len() % 8, 0, "{} is {} B, not whole u64s", path.display(), bytes.len());
    bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect()
}
