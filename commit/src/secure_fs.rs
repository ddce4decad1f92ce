//! Directories that only their owner can write, and files opened inside them without following
//! symbolic links: the ground the cross-process reservation queue stands on.
//!
//! A [`PrivateDir`] is opened once and then used through its descriptor (Unix): every file in
//! it is opened relative to that descriptor with `O_NOFOLLOW` (a symbolic link fails to open
//! instead of redirecting the write), with `O_NONBLOCK` (a FIFO planted in its place cannot hang
//! the open), and checked to be a regular file owned by the effective user before it is read or
//! written. The directory itself must be owned by the effective user, must not be writable by
//! its group or by others, and must not be a symbolic link; otherwise opening it fails with
//! [`FsError::Unsafe`], which names the path, what is wrong and what to do.
//!
//! Renaming or replacing a parent directory after the open changes nothing: the descriptor keeps
//! naming the directory that was checked.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::ProverError;

/// Why a path of a private directory could not be used.
#[derive(Debug)]
pub(crate) enum FsError {
    /// The path exists but is not safe to use (owner, mode, type); nothing was written there.
    Unsafe {
        /// The path refused.
        path: PathBuf,
        /// What is wrong, with the values found.
        problem: String,
        /// What to do about it.
        fix: String,
    },
    /// An I/O error while doing `action` on `path`.
    Io {
        /// The path.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::Unsafe { path, problem, fix } => write!(f, "{}: {problem}; {fix}", path.display()),
            FsError::Io { path, action, source } => write!(f, "{}: cannot {action}: {source}", path.display()),
        }
    }
}

impl From<FsError> for ProverError {
    fn from(e: FsError) -> Self {
        match e {
            FsError::Unsafe { path, problem, fix } => ProverError::UnsafePath { path, problem, fix },
            FsError::Io { path, action, source } => {
                ProverError::input(path, format!("cannot use the reservation directory: cannot {action}: {source}"))
            }
        }
    }
}

/// How [`PrivateDir::open_file`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Open {
    /// Read-only; `None` when there is no such file.
    Existing,
    /// Read-write, created (mode `0600`) when missing.
    CreateOrExisting,
    /// Read-write, created (mode `0600`); fails when the name exists, whatever it is.
    CreateNew,
}

/// The largest file [`read_small`] reads: the queue's files hold one short line.
pub(crate) const SMALL_FILE_MAX: u64 = 256;

/// Reads all of `file` (opened from `path`) as text, refusing more than [`SMALL_FILE_MAX`] bytes,
/// so that a file that keeps growing cannot make the read unbounded.
pub(crate) fn read_small(file: &File, path: &Path) -> Result<String, FsError> {
    let mut bytes = Vec::new();
    let io = |source| FsError::Io { path: path.to_owned(), action: "read the file", source };
    file.take(SMALL_FILE_MAX + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > SMALL_FILE_MAX {
        return Err(FsError::Io {
            path: path.to_owned(),
            action: "read the file",
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("it holds more than {SMALL_FILE_MAX} B; a file of the queue holds one short line"),
            ),
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The advice for a file of the queue that is not what it must be.
const REMOVE_FILE: &str = "remove it (no file of the queue is needed while no commit waits; it is recreated)";

#[cfg(unix)]
mod imp {
    use std::fs::File;
    use std::io::{self, Write as _};
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};

    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
    use rustix::io::Errno;

    use super::{FsError, Open, REMOVE_FILE};

    /// A directory checked to be the effective user's alone, used through its descriptor.
    #[derive(Debug)]
    pub(crate) struct PrivateDir {
        fd: OwnedFd,
        path: PathBuf,
    }

    /// The effective user id.
    fn euid() -> rustix::process::RawUid {
        rustix::process::geteuid().as_raw()
    }

    /// What `stat` describes, in words.
    fn kind(st: &Stat) -> &'static str {
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => "a regular file",
            FileType::Directory => "a directory",
            FileType::Symlink => "a symbolic link",
            FileType::Fifo => "a FIFO",
            FileType::Socket => "a socket",
            FileType::CharacterDevice => "a character device",
            FileType::BlockDevice => "a block device",
            FileType::Unknown => "a file of unknown type",
        }
    }

    fn io_err(path: &Path, action: &'static str, e: Errno) -> FsError {
        FsError::Io { path: path.to_owned(), action, source: io::Error::from(e) }
    }

    /// Why opening `name` in `dirfd` without following links failed: when what is there is not
    /// of the `expected` type (a symbolic link, a socket, a regular file where a directory must
    /// be), a typed refusal naming it; otherwise the I/O error.
    fn open_failure(dirfd: impl rustix::fd::AsFd, name: &Path, path: &Path, e: Errno, expected: FileType) -> FsError {
        let dir = expected == FileType::Directory;
        let what = if dir { "a directory" } else { "a regular file" };
        match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                let target = rustix::fs::readlinkat(&dirfd, name, Vec::new())
                    .map(|t| format!(" (to {})", t.to_string_lossy()))
                    .unwrap_or_default();
                FsError::Unsafe {
                    path: path.to_owned(),
                    problem: format!("a symbolic link{target}, where {what} must be; it is not followed"),
                    fix: if dir {
                        "remove the link, or pass the directory it points to if that directory is yours alone".into()
                    } else {
                        REMOVE_FILE.into()
                    },
                }
            }
            Ok(st) if FileType::from_raw_mode(st.st_mode) != expected => FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("{}, where {what} must be", kind(&st)),
                fix: if dir { "remove it, or pass another directory of your own".into() } else { REMOVE_FILE.into() },
            },
            _ => io_err(path, "open it", e),
        }
    }

    /// Refuses a directory that is not the effective user's alone.
    fn check_dir(fd: &OwnedFd, path: &Path) -> Result<(), FsError> {
        let st = rustix::fs::fstat(fd).map_err(|e| io_err(path, "inspect the directory", e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("{}, not a directory", kind(&st)),
                fix: "remove it, or pass another directory of your own".into(),
            });
        }
        let me = euid();
        if st.st_uid != me {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!(
                    "owned by uid {}, not by this user (uid {me}): its owner could plant or redirect the files \
                     of the reservation queue",
                    st.st_uid
                ),
                fix: "pass a directory of your own (prover: --reservations DIR), or have the directory \
                      removed (it holds nothing while no commit waits)"
                    .into(),
            });
        }
        let mode = Mode::from_raw_mode(st.st_mode);
        if mode.intersects(Mode::WGRP | Mode::WOTH) {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("mode {:o} lets other users create, replace or delete its files", st.st_mode & 0o7777),
                fix: format!(
                    "remove it (it holds nothing while no commit waits), or run `chmod 700 {}` if no one else \
                     has put anything in it",
                    path.display()
                ),
            });
        }
        Ok(())
    }

    /// Refuses a file of the queue that is not a regular file owned by the effective user.
    fn check_file(file: &File, path: &Path) -> Result<(), FsError> {
        use std::os::fd::AsFd as _;
        let st = rustix::fs::fstat(file.as_fd()).map_err(|e| io_err(path, "inspect the file", e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("{}, where a regular file of the queue must be", kind(&st)),
                fix: REMOVE_FILE.into(),
            });
        }
        let me = euid();
        if st.st_uid != me {
            return Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("owned by uid {}, not by this user (uid {me})", st.st_uid),
                fix: REMOVE_FILE.into(),
            });
        }
        Ok(())
    }

    const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

    impl PrivateDir {
        /// Opens `path` as a private directory, creating it (mode `0700`, its missing parents
        /// with the default mode) when it does not exist.
        pub(crate) fn open_root(path: &Path) -> Result<Self, FsError> {
            // `dir/` would follow a link named `dir`: the components drop the trailing slash.
            let path: PathBuf = path.components().collect();
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|source| FsError::Io {
                    path: parent.to_owned(),
                    action: "create the directory",
                    source,
                })?;
            }
            Self::open_in(CWD, &path, path.clone())
        }

        /// Opens (creating it, mode `0700`) the private directory `name` inside this one.
        pub(crate) fn open_subdir(&self, name: &str) -> Result<Self, FsError> {
            Self::open_in(&self.fd, Path::new(name), self.path.join(name))
        }

        fn open_in(at: impl rustix::fd::AsFd, name: &Path, path: PathBuf) -> Result<Self, FsError> {
            match rustix::fs::mkdirat(&at, name, Mode::RWXU) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(io_err(&path, "create the directory", e)),
            }
            let fd = rustix::fs::openat(&at, name, DIR_FLAGS, Mode::empty())
                .map_err(|e| open_failure(&at, name, &path, e, FileType::Directory))?;
            check_dir(&fd, &path)?;
            Ok(Self { fd, path })
        }

        /// The directory's path, as opened.
        pub(crate) fn path(&self) -> &Path {
            &self.path
        }

        /// Opens the file `name` of this directory as `how` says, refusing a symbolic link, a
        /// file that is not regular and a file of another user.
        pub(crate) fn open_file(&self, name: &str, how: Open) -> Result<Option<File>, FsError> {
            let path = self.path.join(name);
            let base = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let flags = match how {
                Open::Existing => base | OFlags::RDONLY,
                Open::CreateOrExisting => base | OFlags::RDWR | OFlags::CREATE,
                Open::CreateNew => base | OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
            };
            let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::RUSR | Mode::WUSR) {
                Ok(fd) => fd,
                Err(Errno::NOENT) if how == Open::Existing => return Ok(None),
                Err(e) => return Err(open_failure(&self.fd, Path::new(name), &path, e, FileType::RegularFile)),
            };
            let file = File::from(fd);
            check_file(&file, &path)?;
            Ok(Some(file))
        }

        /// Replaces the file `name` with `bytes` atomically: written to `<name>.tmp`, a private
        /// new file, then renamed over `name` (a rename replaces a link, it never writes through
        /// it). Callers serialise writers of one name (the queue's directory lock).
        pub(crate) fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), FsError> {
            let tmp = format!("{name}.tmp");
            let tmp_path = self.path.join(&tmp);
            // A leftover of a writer that died between its create and its rename.
            self.remove(&tmp)?;
            let file = self.open_file(&tmp, Open::CreateNew)?.ok_or_else(|| FsError::Io {
                path: tmp_path.clone(),
                action: "create the file",
                source: io::ErrorKind::NotFound.into(),
            })?;
            let written = (&file).write_all(bytes).and_then(|()| (&file).flush());
            drop(file);
            let result = written
                .map_err(|source| FsError::Io { path: tmp_path.clone(), action: "write the file", source })
                .and_then(|()| {
                    rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)
                        .map_err(|e| io_err(&self.path.join(name), "rename the new file over it", e))
                });
            if result.is_err() {
                let _ = self.remove(&tmp);
            }
            result
        }

        /// Deletes the entry `name` (the link itself when it is one); a missing one is fine.
        pub(crate) fn remove(&self, name: &str) -> Result<(), FsError> {
            match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(io_err(&self.path.join(name), "delete it", e)),
            }
        }

        /// The names in the directory that are valid UTF-8, `.` and `..` excluded.
        pub(crate) fn names(&self) -> Result<Vec<String>, FsError> {
            let list = rustix::fs::Dir::read_from(&self.fd).map_err(|e| io_err(&self.path, "list the directory", e))?;
            let mut names = Vec::new();
            for entry in list {
                let entry = entry.map_err(|e| io_err(&self.path, "list the directory", e))?;
                if let Ok(name) = entry.file_name().to_str()
                    && name != "."
                    && name != ".."
                {
                    names.push(name.to_owned());
                }
            }
            Ok(names)
        }
    }
}

#[cfg(not(unix))]
mod imp {
    //! Without descriptor-relative calls: each path is checked with `symlink_metadata` before it
    //! is used. Per-user temporary and runtime directories are private on these platforms.

    use std::fs::{self, File, OpenOptions};
    use std::io::{self, Write as _};
    use std::path::{Path, PathBuf};

    use super::{FsError, Open, REMOVE_FILE};

    /// A directory used by path.
    #[derive(Debug)]
    pub(crate) struct PrivateDir {
        path: PathBuf,
    }

    fn io_err(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> FsError + '_ {
        move |source| FsError::Io { path: path.to_owned(), action, source }
    }

    fn refuse_link(path: &Path, what: &str, fix: &str) -> Result<Option<fs::Metadata>, FsError> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Err(FsError::Unsafe {
                path: path.to_owned(),
                problem: format!("a symbolic link, where {what} must be; it is not followed"),
                fix: fix.into(),
            }),
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(path, "inspect it")(e)),
        }
    }

    impl PrivateDir {
        pub(crate) fn open_root(path: &Path) -> Result<Self, FsError> {
            let path: PathBuf = path.components().collect();
            Self::open_path(path)
        }

        pub(crate) fn open_subdir(&self, name: &str) -> Result<Self, FsError> {
            Self::open_path(self.path.join(name))
        }

        fn open_path(path: PathBuf) -> Result<Self, FsError> {
            let fix = "remove the link, or pass the directory it points to";
            if refuse_link(&path, "a directory", fix)?.is_none() {
                fs::create_dir_all(&path).map_err(io_err(&path, "create the directory"))?;
            }
            match refuse_link(&path, "a directory", fix)? {
                Some(m) if m.is_dir() => Ok(Self { path }),
                _ => Err(FsError::Unsafe {
                    path: path.clone(),
                    problem: "not a directory".into(),
                    fix: "remove it, or pass another directory of your own".into(),
                }),
            }
        }

        pub(crate) fn path(&self) -> &Path {
            &self.path
        }

        pub(crate) fn open_file(&self, name: &str, how: Open) -> Result<Option<File>, FsError> {
            let path = self.path.join(name);
            match refuse_link(&path, "a regular file", REMOVE_FILE)? {
                Some(m) if !m.is_file() => {
                    return Err(FsError::Unsafe {
                        path,
                        problem: "not a regular file".into(),
                        fix: REMOVE_FILE.into(),
                    });
                }
                None if how == Open::Existing => return Ok(None),
                _ => {}
            }
            let mut o = OpenOptions::new();
            match how {
                Open::Existing => o.read(true),
                Open::CreateOrExisting => o.read(true).write(true).create(true).truncate(false),
                Open::CreateNew => o.read(true).write(true).create_new(true),
            };
            match o.open(&path) {
                Ok(f) => Ok(Some(f)),
                Err(e) if e.kind() == io::ErrorKind::NotFound && how == Open::Existing => Ok(None),
                Err(e) => Err(io_err(&path, "open it")(e)),
            }
        }

        pub(crate) fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), FsError> {
            let tmp = format!("{name}.tmp");
            self.remove(&tmp)?;
            let tmp_path = self.path.join(&tmp);
            let mut file = self.open_file(&tmp, Open::CreateNew)?.ok_or_else(|| FsError::Io {
                path: tmp_path.clone(),
                action: "create the file",
                source: io::ErrorKind::NotFound.into(),
            })?;
            let written = file.write_all(bytes).and_then(|()| file.flush());
            drop(file);
            let result = written.map_err(io_err(&tmp_path, "write the file")).and_then(|()| {
                let path = self.path.join(name);
                fs::rename(&tmp_path, &path).map_err(io_err(&path, "rename the new file over it"))
            });
            if result.is_err() {
                let _ = self.remove(&tmp);
            }
            result
        }

        pub(crate) fn remove(&self, name: &str) -> Result<(), FsError> {
            let path = self.path.join(name);
            match fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err(&path, "delete it")(e)),
            }
        }

        pub(crate) fn names(&self) -> Result<Vec<String>, FsError> {
            let mut names = Vec::new();
            for entry in fs::read_dir(&self.path).map_err(io_err(&self.path, "list the directory"))? {
                let entry = entry.map_err(io_err(&self.path, "list the directory"))?;
                if let Ok(name) = entry.file_name().into_string() {
                    names.push(name);
                }
            }
            Ok(names)
        }
    }
}

pub(crate) use imp::PrivateDir;
