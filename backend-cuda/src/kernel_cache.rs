//! The on-disk cache of compiled kernel images (CUBIN, or PTX for drivers newer than NVRTC).
//!
//! - **Keyed by everything that changes the image:** a BLAKE3 hash over the key format, the
//!   kernel file's name and text, every header, the NVRTC options (architecture and kernel
//!   selection included), and the NVRTC version ([`crate::kernel_units::unit_key`]). A changed
//!   source or toolkit is a different key, never a stale hit. The driver is not part of it: it
//!   takes no part in producing an image, so a cache filled without a GPU (`prover prepare
//!   --arch`, a container build) is the one the device's process finds.
//! - **Where:** what [`crate::CudaOptions::kernel_cache`] says, resolved once when a device is
//!   opened: a directory, no cache, or by default the platform's cache directory
//!   ([`default_dir`]: `$XDG_CACHE_HOME/stark-commit/kernels` or `~/.cache/stark-commit/kernels`
//!   on Linux, `~/Library/Caches/stark-commit/kernels` on macOS,
//!   `%LOCALAPPDATA%\stark-commit\kernels` on Windows).
//! - **Private:** the cache holds code the process will execute, so its directory is created
//!   `0700`; an existing directory owned by another user, or writable by others and not ours to
//!   fix, turns the cache off (with a warning) instead of being trusted.
//! - **Checked before use:** an entry is a header (magic, payload length, BLAKE3 of the payload)
//!   and the payload; a truncated or corrupt entry is detected, recompiled and replaced.
//! - **Only regular files, of bounded size:** an entry is opened without following symbolic
//!   links and without blocking, and must be a regular file of this user of at most
//!   [`MAX_ENTRY_BYTES`]; it is read through that bound. Anything else in its place (a link to
//!   `/dev/zero`, a FIFO, a directory, another user's file, a file far larger than any image) is
//!   a miss with one warning: never followed, never read without bound, never waited on.
//! - **Safe under concurrency:** an entry is written to a private temporary file in the same
//!   directory and renamed over the final name, so a reader sees either no entry or a whole one,
//!   whatever number of processes compile the same kernel at once.
//! - **Never fatal:** a cache that cannot be read or written costs a compile and one warning per
//!   kind of problem per cache, never an error.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use backend_api::Result;

use crate::options::KernelCacheSetting;

/// The first bytes of every entry.
const MAGIC: &[u8; 8] = b"SCKC\x01\0\0\0";
/// Magic, payload length (u64 LE), BLAKE3 of the payload.
const HEADER: usize = 8 + 8 + 32;
/// The largest entry read or stored, header included: 64 MiB. The largest image (a CUBIN of
/// every kernel of one file for one architecture) is a few MiB; an entry beyond this bound is
/// not a cache entry of ours.
pub(crate) const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// The key of one compiled image: a hex BLAKE3 digest of its inputs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey(String);

impl CacheKey {
    /// The key of the image compiled from `parts` (each part is length-prefixed, so no two
    /// different lists of parts give the same hashed bytes).
    /// ([`crate::kernel_units::key_digest`], which also covers the key format).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn new(parts: &[&[u8]]) -> Self {
        Self(crate::kernel_units::key_digest(parts))
    }

    /// The key whose hex digest is `digest` ([`crate::kernel_units::unit_key`]).
    pub(crate) fn from_digest(digest: String) -> Self {
        Self(digest)
    }

    /// The hex digest.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    fn file_name(&self) -> String {
        format!("{}.bin", self.0)
    }
}

/// Where an image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageOrigin {
    /// Compiled when the crate was built, and embedded in the binary (the `embedded-kernels`
    /// feature): no NVRTC and no cache were used.
    Embedded,
    /// Read from the on-disk cache.
    Cache,
    /// Compiled by NVRTC (and stored, when the cache is usable).
    Compiled,
}

/// The kinds of problem the cache warns about, once each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Problem {
    /// The directory cannot be used (not ours, not private, cannot be created).
    Directory,
    /// An entry was unreadable, truncated or corrupt.
    Corrupt,
    /// An entry could not be written.
    Unwritable,
    /// Something other than a regular file of this user of bounded size stood where an entry
    /// should be (a symbolic link, a FIFO, a device, a directory, an oversized file).
    NotAnEntry,
}

/// An on-disk cache of kernel images in one directory.
pub(crate) struct KernelCache {
    /// `None`: caching is off.
    dir: Option<PathBuf>,
    /// The directory after its ownership and permission checks (`None`: unusable).
    checked: OnceLock<Option<PathBuf>>,
    warned: [AtomicBool; 4],
    /// Every warning printed, for tests and reports.
    warnings: Mutex<Vec<String>>,
}

impl KernelCache {
    /// A cache in `dir` (created, `0700`, at first use).
    pub(crate) fn at(dir: impl Into<PathBuf>) -> Self {
        Self::with_dir(Some(dir.into()))
    }

    /// A cache that stores nothing: every lookup compiles.
    pub(crate) fn disabled() -> Self {
        Self::with_dir(None)
    }

    fn with_dir(dir: Option<PathBuf>) -> Self {
        Self { dir, checked: OnceLock::new(), warned: Default::default(), warnings: Mutex::new(Vec::new()) }
    }

    /// The cache `setting` selects: its directory, none, or [`default_dir`] (no cache when the
    /// platform names no home directory).
    pub(crate) fn from_setting(setting: &KernelCacheSetting) -> Self {
        match setting {
            KernelCacheSetting::Dir(dir) => Self::at(dir),
            KernelCacheSetting::Off => Self::disabled(),
            KernelCacheSetting::Default => match default_dir() {
                Some(d) => Self::at(d),
                None => Self::disabled(),
            },
        }
    }

    /// The configured directory, whether or not it is usable.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The warnings printed so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The image for `key`: the cached one when a valid entry exists, else `compile()`'s, which
    /// is then stored. Cache problems cost a compile and a warning, never an error.
    ///
    /// # Errors
    /// Only `compile`'s own error (which is not cached).
    pub(crate) fn get_or_compile(
        &self,
        key: &CacheKey,
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<(Vec<u8>, ImageOrigin)> {
        let Some(dir) = self.usable_dir() else {
            return Ok((compile()?, ImageOrigin::Compiled));
        };
        let path = dir.join(key.file_name());
        match read_entry(&path) {
            Ok(Some(image)) => return Ok((image, ImageOrigin::Cache)),
            Ok(None) => {}
            Err(Unusable::Corrupt(why)) => {
                self.warn(Problem::Corrupt, format!("{}: {why}; recompiling", path.display()));
            }
            Err(Unusable::NotAnEntry(why)) => self.warn(
                Problem::NotAnEntry,
                format!("{}: {why}; treated as a miss, recompiling and replacing it", path.display()),
            ),
        }
        let image = compile()?;
        if (HEADER + image.len()) as u64 > MAX_ENTRY_BYTES {
            self.warn(
                Problem::Unwritable,
                format!(
                    "not storing {}: the image is {} B, more than an entry may hold ({MAX_ENTRY_BYTES} B)",
                    path.display(),
                    image.len()
                ),
            );
        } else if let Err(e) = write_entry(dir, &path, &image) {
            self.warn(Problem::Unwritable, format!("cannot store {}: {e}", path.display()));
        }
        Ok((image, ImageOrigin::Compiled))
    }

    fn usable_dir(&self) -> Option<&Path> {
        self.checked
            .get_or_init(|| {
                let dir = self.dir.as_ref()?;
                match prepare_dir(dir) {
                    Ok(()) => Some(dir.clone()),
                    Err(why) => {
                        self.warn(
                            Problem::Directory,
                            format!("{}: {why}; kernels are compiled uncached", dir.display()),
                        );
                        None
                    }
                }
            })
            .as_deref()
    }

    fn warn(&self, problem: Problem, msg: String) {
        let flag = &self.warned[problem as usize];
        if !flag.swap(true, Ordering::Relaxed) {
            let msg = format!("warning: kernel cache: {msg}");
            eprintln!("{msg}");
            self.warnings.lock().unwrap_or_else(|p| p.into_inner()).push(msg);
        }
    }
}

/// The platform's cache directory for this project's kernels, when the environment names a home.
pub(crate) fn default_dir() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = if cfg!(windows) {
        non_empty("LOCALAPPDATA")?
    } else if cfg!(target_os = "macos") {
        non_empty("HOME")?.join("Library").join("Caches")
    } else {
        match non_empty("XDG_CACHE_HOME") {
            Some(p) if p.is_absolute() => p,
            _ => non_empty("HOME")?.join(".cache"),
        }
    };
    Some(base.join("stark-commit").join("kernels"))
}

/// Creates `dir` (mode `0700`) if needed and checks that it is a directory owned by this user
/// that no one else can write or read; a directory of ours with looser permissions is tightened.
fn prepare_dir(dir: &Path) -> std::result::Result<(), String> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create the directory: {e}")),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect the directory: {e}"))?;
    if !meta.is_dir() {
        return Err("not a directory (symbolic links are not followed)".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!("owned by uid {}, not by this user (uid {me})", meta.uid()));
        }
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("mode {:o} is not private and cannot be set to 700: {e}", meta.mode() & 0o777))?;
        }
    }
    Ok(())
}

/// Why an entry was not used.
#[derive(Debug)]
enum Unusable {
    /// Unreadable, truncated or not matching its hash.
    Corrupt(String),
    /// Not a regular file of this user of at most [`MAX_ENTRY_BYTES`].
    NotAnEntry(String),
}

/// Opens an entry without following a symbolic link and without blocking (a FIFO in its place
/// would otherwise wait for a writer), and checks that it is a regular file of this user of at
/// most [`MAX_ENTRY_BYTES`]: `Ok(None)` when there is none.
fn open_entry(path: &Path) -> std::result::Result<Option<(fs::File, u64)>, Unusable> {
    let mut opts = fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut opts, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    #[cfg(not(unix))]
    {
        if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Unusable::NotAnEntry("a symbolic link, not a regular file (not followed)".into()));
        }
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            let link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            return Err(if link {
                let to = fs::read_link(path).map(|t| format!(" to {}", t.display())).unwrap_or_default();
                Unusable::NotAnEntry(format!("a symbolic link{to}, not a regular file (not followed)"))
            } else if fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
                Unusable::NotAnEntry(format!("not a regular file ({e})"))
            } else {
                Unusable::Corrupt(format!("unreadable ({e})"))
            });
        }
    };
    let meta = file.metadata().map_err(|e| Unusable::Corrupt(format!("cannot inspect it ({e})")))?;
    if !meta.is_file() {
        return Err(Unusable::NotAnEntry(format!("{}, not a regular file", kind_of(&meta.file_type()))));
    }
    if meta.len() > MAX_ENTRY_BYTES {
        return Err(Unusable::NotAnEntry(format!("{} B, more than any entry holds ({MAX_ENTRY_BYTES} B)", meta.len())));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(Unusable::NotAnEntry(format!("owned by uid {}, not by this user (uid {me})", meta.uid())));
        }
    }
    Ok(Some((file, meta.len())))
}

/// What a file type is, in words.
fn kind_of(t: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() { "a directory" } else { "a special file" }
}

/// Reads an entry: `Ok(None)` when there is none, `Err` with the reason when it is not a regular
/// file of bounded size ([`open_entry`]), unreadable, truncated or does not match its hash.
fn read_entry(path: &Path) -> std::result::Result<Option<Vec<u8>>, Unusable> {
    use std::io::Read as _;
    let Some((file, len)) = open_entry(path)? else { return Ok(None) };
    let mut bytes = Vec::with_capacity(len as usize);
    // Through the bound even if the file grows after the check.
    file.take(MAX_ENTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Unusable::Corrupt(format!("unreadable ({e})")))?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(Unusable::NotAnEntry(format!("grew past {MAX_ENTRY_BYTES} B while read")));
    }
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(Unusable::Corrupt(format!("not a cache entry ({} bytes, bad header)", bytes.len())));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(Unusable::Corrupt(format!("truncated: {} payload bytes, the header says {len}", payload.len())));
    }
    if blake3::hash(payload).as_bytes() != &bytes[16..HEADER] {
        return Err(Unusable::Corrupt("content does not match its hash".into()));
    }
    Ok(Some(payload.to_vec()))
}

/// Writes an entry through a private temporary file renamed over `path`.
fn write_entry(dir: &Path, path: &Path, image: &[u8]) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(image.len() as u64).to_le_bytes())?;
        f.write_all(blake3::hash(image).as_bytes())?;
        f.write_all(image)?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    //! The cache with a fake compiler: no GPU or NVRTC needed.

    use std::process::Command;
    use std::sync::atomic::AtomicUsize;

    use backend_api::Error;

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "stark-kc-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A deterministic "compiled image" for a key name, of a length that varies with it.
    fn fake_image(seed: &str) -> Vec<u8> {
        let h = blake3::hash(seed.as_bytes());
        let n = 1000 + (h.as_bytes()[0] as usize) * 37;
        let mut out = Vec::with_capacity(n);
        let mut x = u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap()) | 1;
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(x as u8);
        }
        out
    }

    fn compile_counted<'a>(count: &'a AtomicUsize, seed: &'a str) -> impl FnOnce() -> Result<Vec<u8>> + 'a {
        move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(fake_image(seed))
        }
    }

    fn entry_files(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v
    }

    #[test]
    fn keys_separate_every_part_and_its_boundaries() {
        let k = |parts: &[&[u8]]| CacheKey::new(parts);
        assert_eq!(k(&[b"a", b"bc"]), k(&[b"a", b"bc"]));
        assert_ne!(k(&[b"a", b"bc"]), k(&[b"ab", b"c"]), "length prefixes keep part boundaries");
        assert_ne!(k(&[b"a"]), k(&[b"a", b""]));
        assert_ne!(k(&[b"sm_90"]), k(&[b"sm_89"]));
        // The file name is the 64-digit hex digest.
        let name = k(&[b"x"]).file_name();
        assert_eq!(name.len(), 64 + 4);
        assert!(name[..64].bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn second_lookup_hits_and_returns_the_same_bytes() {
        let dir = TempDir::new("hit");
        let cache = KernelCache::at(dir.0.join("k"));
        let key = CacheKey::new(&[b"lde.cu", b"sm_90"]);
        let n = AtomicUsize::new(0);
        let (a, oa) = cache.get_or_compile(&key, compile_counted(&n, "lde")).unwrap();
        assert_eq!((oa, n.load(Ordering::SeqCst)), (ImageOrigin::Compiled, 1));
        // A second cache object on the same directory (another process) finds the entry.
        let again = KernelCache::at(dir.0.join("k"));
        let (b, ob) = again.get_or_compile(&key, compile_counted(&n, "lde")).unwrap();
        assert_eq!((ob, n.load(Ordering::SeqCst)), (ImageOrigin::Cache, 1));
        assert_eq!(a, fake_image("lde"));
        assert_eq!(b, a);
        // Another key compiles.
        let other = CacheKey::new(&[b"lde.cu", b"sm_100"]);
        let (c, oc) = again.get_or_compile(&other, compile_counted(&n, "other")).unwrap();
        assert_eq!((oc, n.load(Ordering::SeqCst)), (ImageOrigin::Compiled, 2));
        assert_eq!(c, fake_image("other"));
        assert!(cache.warnings().is_empty() && again.warnings().is_empty());
        // Two entries and no temporary files left behind.
        let files = entry_files(&dir.0.join("k"));
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files.iter().all(|f| f.extension().is_some_and(|e| e == "bin")));
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_is_private_and_loosened_modes_are_tightened() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = TempDir::new("mode");
        let d = dir.0.join("nested").join("kernels");
        let cache = KernelCache::at(&d);
        let n = AtomicUsize::new(0);
        cache.get_or_compile(&CacheKey::new(&[b"a"]), compile_counted(&n, "a")).unwrap();
        assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        let entry = &entry_files(&d)[0];
        assert_eq!(fs::metadata(entry).unwrap().permissions().mode() & 0o777, 0o600);
        // A directory of ours left world-readable is set back to 0700 before use.
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        let cache = KernelCache::at(&d);
        let (_, o) = cache.get_or_compile(&CacheKey::new(&[b"a"]), compile_counted(&n, "a")).unwrap();
        assert_eq!(o, ImageOrigin::Cache);
        assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn corrupt_truncated_and_foreign_entries_are_recompiled_and_warned_once() {
        let dir = TempDir::new("corrupt");
        let d = dir.0.join("k");
        let key = CacheKey::new(&[b"hash.cu"]);
        let n = AtomicUsize::new(0);
        KernelCache::at(&d).get_or_compile(&key, compile_counted(&n, "hash")).unwrap();
        let path = d.join(key.file_name());
        let good = fs::read(&path).unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut bad_len = good.clone();
        bad_len[8] ^= 1;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("one payload bit flipped", flipped),
            ("truncated payload", good[..good.len() - 10].to_vec()),
            ("truncated header", good[..20].to_vec()),
            ("empty file", Vec::new()),
            ("length field changed", bad_len),
            ("a raw image without the header", fake_image("hash")),
        ];
        let cache = KernelCache::at(&d);
        for (what, bytes) in &cases {
            fs::write(&path, bytes).unwrap();
            let before = n.load(Ordering::SeqCst);
            let (img, o) = cache.get_or_compile(&key, compile_counted(&n, "hash")).unwrap();
            assert_eq!(o, ImageOrigin::Compiled, "{what}: must not load");
            assert_eq!(n.load(Ordering::SeqCst), before + 1, "{what}");
            assert_eq!(img, fake_image("hash"), "{what}");
            // The entry was replaced by a valid one.
            assert_eq!(fs::read(&path).unwrap(), good, "{what}: entry not rewritten");
        }
        let w = cache.warnings();
        assert_eq!(w.len(), 1, "one warning for the kind, not one per entry: {w:?}");
        assert!(w[0].contains(&key.file_name()) && w[0].contains("recompiling"), "{w:?}");
        // A healthy entry is then a hit.
        let (_, o) = cache.get_or_compile(&key, compile_counted(&n, "hash")).unwrap();
        assert_eq!(o, ImageOrigin::Cache);
    }

    /// Runs one lookup of `key` in a fresh cache on `d` on another thread, failing if it does
    /// not finish within 10 s (a hostile entry must never hang or read without bound).
    fn lookup_in_time(d: &Path, key: &CacheKey, seed: &'static str) -> (Vec<u8>, ImageOrigin, Vec<String>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let (d, key) = (d.to_owned(), key.clone());
        std::thread::spawn(move || {
            let cache = KernelCache::at(&d);
            let n = AtomicUsize::new(0);
            let (img, o) = cache.get_or_compile(&key, compile_counted(&n, seed)).unwrap();
            let _ = tx.send((img, o, cache.warnings()));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the lookup did not finish in 10 s: a hostile entry hung or ran unbounded"))
    }

    /// What stands where an entry should be is a miss with one warning, whatever it is, and the
    /// lookup finishes at once: a link to `/dev/zero` (unbounded read), a FIFO (an open that
    /// waits for a writer), a link to a valid entry elsewhere (not ours to trust), a directory
    /// (not replaceable: the image is still returned), a file beyond the size bound.
    #[cfg(unix)]
    #[test]
    fn entries_that_are_not_regular_files_are_misses_with_a_warning_and_never_hang() {
        let dir = TempDir::new("hostile");
        let d = dir.0.join("k");
        let key = CacheKey::new(&[b"hostile.cu"]);
        let n = AtomicUsize::new(0);
        KernelCache::at(&d).get_or_compile(&key, compile_counted(&n, "hostile")).unwrap();
        let path = d.join(key.file_name());
        let good = fs::read(&path).unwrap();
        let elsewhere = dir.0.join("valid-entry-elsewhere.bin");
        fs::write(&elsewhere, &good).unwrap();
        let mkfifo = |p: &Path| {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
        };
        type Plant = Box<dyn Fn(&Path)>;
        let cases: Vec<(&str, Plant, &str, bool)> = vec![
            (
                "a link to /dev/zero",
                Box::new(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
                "symbolic link to /dev/zero",
                true,
            ),
            ("a FIFO", Box::new(mkfifo), "a FIFO, not a regular file", true),
            (
                "a link to a valid entry",
                Box::new(move |p| std::os::unix::fs::symlink(&elsewhere, p).unwrap()),
                "not followed",
                true,
            ),
            (
                "an oversized file",
                Box::new(|p| fs::File::create(p).unwrap().set_len(MAX_ENTRY_BYTES + 1).unwrap()),
                "more than any entry holds",
                true,
            ),
            (
                "a directory",
                Box::new(|p| fs::create_dir_all(p.join("inner")).unwrap()),
                "a directory, not a regular file",
                false,
            ),
        ];
        for (what, plant, words, replaced) in cases {
            let _ = fs::remove_file(&path);
            plant(&path);
            let t0 = std::time::Instant::now();
            let (img, o, warnings) = lookup_in_time(&d, &key, "hostile");
            assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("hostile")), "{what}: must be a miss");
            let hostile: Vec<_> = warnings.iter().filter(|w| w.contains("treated as a miss")).collect();
            assert_eq!(hostile.len(), 1, "{what}: one warning: {warnings:?}");
            assert!(hostile[0].contains(words) && hostile[0].contains(&key.file_name()), "{what}: {warnings:?}");
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{what}: took {:?}", t0.elapsed());
            if replaced {
                // The rename replaced what was planted (a link is replaced, not written through).
                let meta = fs::symlink_metadata(&path).unwrap();
                assert!(meta.is_file(), "{what}: not replaced by a regular file");
                assert_eq!(fs::read(&path).unwrap(), good, "{what}");
            } else {
                assert!(warnings.iter().any(|w| w.contains("cannot store")), "{what}: {warnings:?}");
                fs::remove_dir_all(&path).unwrap();
            }
        }
        // The valid file the link pointed to is untouched.
        assert_eq!(fs::read(dir.0.join("valid-entry-elsewhere.bin")).unwrap(), good);
        // One cache meeting several hostile entries warns once for the kind.
        let cache = KernelCache::at(&d);
        for i in 0..3 {
            let k = CacheKey::new(&[format!("many-{i}").as_bytes()]);
            std::os::unix::fs::symlink("/dev/zero", d.join(k.file_name())).unwrap();
            let (img, o) = cache.get_or_compile(&k, compile_counted(&n, "many")).unwrap();
            assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("many")));
        }
        assert_eq!(cache.warnings().len(), 1, "{:?}", cache.warnings());
    }

    /// An entry another user owns (planted while the directory was open to others, before it
    /// was tightened) is not trusted: a miss with a warning. Needs root to make such a file.
    #[cfg(unix)]
    #[test]
    fn an_entry_of_another_user_is_a_miss() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIPPED an_entry_of_another_user_is_a_miss: needs root to chown a file");
            return;
        }
        let dir = TempDir::new("foreign");
        let d = dir.0.join("k");
        let key = CacheKey::new(&[b"foreign.cu"]);
        let n = AtomicUsize::new(0);
        KernelCache::at(&d).get_or_compile(&key, compile_counted(&n, "planted")).unwrap();
        let path = d.join(key.file_name());
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let (img, o, warnings) = lookup_in_time(&d, &key, "honest");
        assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("honest")), "a foreign entry must not load");
        assert!(warnings.iter().any(|w| w.contains("owned by uid 65534")), "{warnings:?}");
    }

    /// An image larger than an entry may hold is returned and not stored.
    #[test]
    fn an_image_beyond_the_bound_is_not_stored() {
        let dir = TempDir::new("huge");
        let d = dir.0.join("k");
        let cache = KernelCache::at(&d);
        let key = CacheKey::new(&[b"huge"]);
        let (img, o) = cache.get_or_compile(&key, || Ok(vec![7u8; MAX_ENTRY_BYTES as usize])).unwrap();
        assert_eq!((o, img.len()), (ImageOrigin::Compiled, MAX_ENTRY_BYTES as usize));
        assert!(!d.join(key.file_name()).exists());
        assert!(cache.warnings().iter().any(|w| w.contains("more than an entry may hold")), "{:?}", cache.warnings());
    }

    #[test]
    fn compile_errors_are_returned_and_not_cached() {
        let dir = TempDir::new("err");
        let cache = KernelCache::at(dir.0.join("k"));
        let key = CacheKey::new(&[b"broken.cu"]);
        let err = cache
            .get_or_compile(&key, || {
                Err(Error::KernelCompile { backend: "cuda", kernel: "broken.cu".into(), log: "line 3".into() })
            })
            .unwrap_err();
        assert!(matches!(&err, Error::KernelCompile { log, .. } if log == "line 3"), "{err}");
        assert!(entry_files(&dir.0.join("k")).is_empty());
        let n = AtomicUsize::new(0);
        let (_, o) = cache.get_or_compile(&key, compile_counted(&n, "fixed")).unwrap();
        assert_eq!((o, n.load(Ordering::SeqCst)), (ImageOrigin::Compiled, 1));
    }

    #[test]
    fn an_unusable_directory_compiles_uncached_with_one_warning() {
        let dir = TempDir::new("unusable");
        // A regular file where the directory should be.
        let file = dir.0.join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let cache = KernelCache::at(&file);
        let n = AtomicUsize::new(0);
        for i in 0..3 {
            let key = CacheKey::new(&[format!("k{i}").as_bytes()]);
            let (img, o) = cache.get_or_compile(&key, compile_counted(&n, "u")).unwrap();
            assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("u")));
        }
        assert_eq!(n.load(Ordering::SeqCst), 3);
        let w = cache.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("not a directory"), "{w:?}");
        // A disabled cache compiles every time and says nothing.
        let off = KernelCache::disabled();
        let (_, o) = off.get_or_compile(&CacheKey::new(&[b"z"]), compile_counted(&n, "z")).unwrap();
        assert_eq!((o, n.load(Ordering::SeqCst)), (ImageOrigin::Compiled, 4));
        assert!(off.warnings().is_empty() && off.dir().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn an_unwritable_directory_still_gives_correct_images() {
        use std::os::unix::fs::PermissionsExt as _;
        // Root ignores directory permissions; then there is nothing to test here.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Make the entry's name a directory instead: the rename over it fails for root too.
            let dir = TempDir::new("unwritable-root");
            let d = dir.0.join("k");
            let key = CacheKey::new(&[b"t"]);
            fs::create_dir_all(d.join(key.file_name()).join("inner")).unwrap();
            let cache = KernelCache::at(&d);
            let n = AtomicUsize::new(0);
            let (img, o) = cache.get_or_compile(&key, compile_counted(&n, "t")).unwrap();
            assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("t")));
            let w = cache.warnings();
            // The unreadable entry and the failed store: one warning each.
            assert_eq!(w.len(), 2, "{w:?}");
            assert!(w[1].contains("cannot store"), "{w:?}");
            assert_eq!(entry_files(&d).len(), 1, "the temporary file is removed");
            return;
        }
        let dir = TempDir::new("unwritable");
        let d = dir.0.join("k");
        fs::create_dir_all(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o500)).unwrap();
        let cache = KernelCache::at(&d);
        let n = AtomicUsize::new(0);
        let (img, o) = cache.get_or_compile(&CacheKey::new(&[b"t"]), compile_counted(&n, "t")).unwrap();
        assert_eq!((o, img), (ImageOrigin::Compiled, fake_image("t")));
        assert!(cache.warnings().iter().any(|w| w.contains("cannot store")));
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn platform_directory_follows_the_environment() {
        // Only the pure part: the result ends in stark-commit/kernels when a home is known.
        if let Some(d) = default_dir() {
            assert!(d.ends_with(Path::new("stark-commit").join("kernels")), "{}", d.display());
        }
    }

    #[test]
    fn each_setting_selects_its_cache() {
        let dir = TempDir::new("setting");
        let d = dir.0.join("k");
        let cache = KernelCache::from_setting(&KernelCacheSetting::Dir(d.clone()));
        assert_eq!(cache.dir(), Some(d.as_path()));
        let n = AtomicUsize::new(0);
        let key = CacheKey::new(&[b"setting"]);
        cache.get_or_compile(&key, compile_counted(&n, "s")).unwrap();
        let (_, o) = KernelCache::from_setting(&KernelCacheSetting::Dir(d.clone()))
            .get_or_compile(&key, compile_counted(&n, "s"))
            .unwrap();
        assert_eq!((o, n.load(Ordering::SeqCst)), (ImageOrigin::Cache, 1), "a second cache on the directory hits");
        // Off stores nothing: the same key compiles again.
        let off = KernelCache::from_setting(&KernelCacheSetting::Off);
        assert!(off.dir().is_none());
        let (_, o) = off.get_or_compile(&key, compile_counted(&n, "s")).unwrap();
        assert_eq!((o, n.load(Ordering::SeqCst)), (ImageOrigin::Compiled, 2));
        // Default is the platform directory.
        assert_eq!(KernelCache::from_setting(&KernelCacheSetting::Default).dir(), default_dir().as_deref());
    }

    /// The child side of `eight_processes_share_one_cache`: run only by that test, through the
    /// test binary, with `STARK_KC_CHILD_DIR` set.
    #[test]
    #[ignore = "a child process of eight_processes_share_one_cache"]
    fn child_process_uses_the_shared_cache() {
        let dir = PathBuf::from(std::env::var_os("STARK_KC_CHILD_DIR").expect("STARK_KC_CHILD_DIR"));
        let cache = KernelCache::at(&dir);
        let n = AtomicUsize::new(0);
        for round in 0..20 {
            for name in ["lde", "hash", "merkle"] {
                let key = CacheKey::new(&[name.as_bytes()]);
                let (img, _) = cache
                    .get_or_compile(&key, || {
                        n.fetch_add(1, Ordering::SeqCst);
                        // A slow compiler widens the window in which the processes race.
                        std::thread::sleep(std::time::Duration::from_millis(if round == 0 { 30 } else { 0 }));
                        Ok(fake_image(name))
                    })
                    .unwrap();
                assert_eq!(img, fake_image(name), "{name}: wrong image in round {round}");
            }
        }
        assert!(cache.warnings().is_empty(), "{:?}", cache.warnings());
        println!("compiled {}", n.load(Ordering::SeqCst));
    }

    #[test]
    fn eight_processes_share_one_cache() {
        let dir = TempDir::new("procs");
        let d = dir.0.join("k");
        let exe = std::env::current_exe().unwrap();
        // All eight start before any is waited for, so they race on the empty directory.
        let running: Vec<_> = (0..8)
            .map(|_| {
                Command::new(&exe)
                    .args([
                        "--ignored",
                        "--exact",
                        "--nocapture",
                        "kernel_cache::tests::child_process_uses_the_shared_cache",
                    ])
                    .env("STARK_KC_CHILD_DIR", &d)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in running {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "a child failed:\n{text}");
            assert!(text.contains("1 passed"), "the child test did not run:\n{text}");
        }
        // Exactly the three entries, valid, and no temporary file left behind.
        let files = entry_files(&d);
        assert_eq!(files.len(), 3, "{files:?}");
        for name in ["lde", "hash", "merkle"] {
            let path = d.join(CacheKey::new(&[name.as_bytes()]).file_name());
            assert_eq!(read_entry(&path).unwrap(), Some(fake_image(name)), "{name}");
        }
    }
}
