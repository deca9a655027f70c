//! Turning `--input` arguments (files, directories, globs; local or in an object store) into an
//! ordered list of files.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage;

/// The JSON-lines extensions.
pub const JSONL_EXTENSIONS: &[&str] = &[".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd"];

/// The extensions picked up when a directory is given: JSON lines, Parquet and Arrow.
pub const INPUT_EXTENSIONS: &[&str] = &[".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd", ".parquet", ".arrow"];

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// What identifies a file or directory whatever path reaches it: (device, inode) where there are
/// such, else the canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileId {
    #[cfg(unix)]
    Inode(u64, u64),
    #[cfg_attr(unix, allow(dead_code))]
    Path(PathBuf),
}

fn file_id(path: &Path) -> Result<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        Ok(FileId::Inode(m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        Ok(FileId::Path(std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?))
    }
}

/// The files taken so far, to refuse one reached a second time (given twice, a directory and a
/// file in it, two overlapping globs, a link): reading it twice would silently double its
/// documents.
#[derive(Default)]
struct Taken {
    local: std::collections::HashMap<FileId, PathBuf>,
    remote: std::collections::HashSet<PathBuf>,
}

impl Taken {
    fn add(&mut self, path: PathBuf, files: &mut Vec<PathBuf>) -> Result<()> {
        // Standard input has no file behind it (it is refused twice in `expand_inputs`).
        let first = if super::is_stdin(&path) {
            None
        } else if storage::is_remote(&path.to_string_lossy()) {
            (!self.remote.insert(path.clone())).then(|| path.clone())
        } else {
            self.local.insert(file_id(&path)?, path.clone())
        };
        if let Some(first) = first {
            return Err(Error::invalid(format!(
                "{} is the same file as {} (given twice, inside a directory also given, or reached \
                 through a link): each input file may be read only once, so give it once",
                path.display(),
                first.display()
            )));
        }
        files.push(path);
        Ok(())
    }
}

/// Every file below `dir` whose name ends in one of `exts`, sorted by path. A directory link that
/// leads back to a directory being walked (a loop, `d/self -> .`) is skipped: everything below
/// it is already being walked.
fn walk(dir: &Path, exts: &[&str], ancestors: &mut Vec<FileId>, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|e| Error::io(dir, e)))
        .collect::<Result<Vec<_>>>()?;
    // Sorted, so that which of two paths to one file comes first never depends on the listing.
    entries.sort();
    for path in entries {
        if path.is_dir() {
            let id = file_id(&path)?;
            if ancestors.contains(&id) {
                continue;
            }
            ancestors.push(id);
            walk(&path, exts, ancestors, out)?;
            ancestors.pop();
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| exts.iter().any(|e| n.ends_with(e))) {
            out.push(path);
        }
    }
    Ok(())
}

/// An object-store input: an object, or a prefix (as a directory), or a glob over keys.
fn expand_remote(spec: &str, exts: &[&str], files: &mut Vec<PathBuf>) -> Result<()> {
    let remote = storage::resolve(spec)?;
    let found = if has_glob_chars(remote.key.as_ref()) {
        storage::glob(&remote)?
    } else if storage::size(Path::new(spec)).is_ok() {
        vec![remote]
    } else {
        storage::list(&remote, exts)?
    };
    if found.is_empty() {
        return Err(Error::io(
            Path::new(spec),
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such object, and no objects under it"),
        ));
    }
    files.extend(found.iter().map(storage::as_path));
    Ok(())
}

/// Expand inputs in argument order: a file is taken as is (and `-`, standard input); a directory contributes every file
/// below it whose name ends in one of `exts`, sorted by path; a glob contributes its matching
/// files, sorted. In an object store (`s3://bucket/...`) the same, keys standing for paths: an
/// object, every object under a prefix, or every object a glob matches, sorted by key. The
/// result depends only on the arguments and the files, never on the order they are listed in.
///
/// A file reached twice (by (device, inode), whatever the paths) is refused with an error that
/// names both paths; a directory loop made by a link is not followed.
pub fn expand_inputs(specs: &[impl AsRef<str>], exts: &[&str]) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for spec in specs {
        let spec = spec.as_ref();
        let path = Path::new(spec);
        if spec == super::STDIN {
            if files.iter().any(|f: &PathBuf| super::is_stdin(f)) {
                return Err(Error::invalid("standard input (`-`) is given twice"));
            }
            files.push(PathBuf::from(spec));
        } else if storage::is_remote(spec) {
            expand_remote(spec, exts, &mut files)?;
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else if path.is_dir() {
            let mut found = Vec::new();
            walk(path, exts, &mut vec![file_id(path)?], &mut found)?;
            found.sort();
            files.extend(found);
        } else if has_glob_chars(spec) {
            let pattern = glob::glob(spec).map_err(|e| Error::invalid(format!("bad glob pattern {spec:?}: {e}")))?;
            let mut found: Vec<PathBuf> = pattern.filter_map(|p| p.ok()).filter(|p| p.is_file()).collect();
            found.sort();
            if found.is_empty() {
                return Err(Error::invalid(format!("the pattern {spec:?} matches no files")));
            }
            files.extend(found);
        } else {
            return Err(Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "input does not exist")));
        }
    }
    let mut taken = Taken::default();
    let mut unique = Vec::with_capacity(files.len());
    for f in files {
        taken.add(f, &mut unique)?;
    }
    let files = unique;
    if files.is_empty() {
        let specs: Vec<&str> = specs.iter().map(|s| s.as_ref()).collect();
        return Err(Error::invalid(format!(
            "no input files found in {specs:?} (directories are searched for {})",
            exts.join(", ")
        )));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_walked_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("b/sub")).unwrap();
        for f in ["b/sub/z.jsonl", "a.jsonl.zst", "b/a.jsonl.gz", "notes.txt", "c.jsonl"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let got = expand_inputs(&[d.to_str().unwrap()], JSONL_EXTENSIONS).unwrap();
        let rel: Vec<_> = got.iter().map(|p| p.strip_prefix(d).unwrap().to_str().unwrap().to_string()).collect();
        assert_eq!(rel, ["a.jsonl.zst", "b/a.jsonl.gz", "b/sub/z.jsonl", "c.jsonl"]);
    }

    #[cfg(unix)]
    #[test]
    fn directory_loops_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.jsonl"), "").unwrap();
        std::fs::write(d.join("sub/b.jsonl"), "").unwrap();
        // Two loops: followed, the walk would take each file again at every depth, exponentially.
        std::os::unix::fs::symlink(".", d.join("self")).unwrap();
        std::os::unix::fs::symlink("..", d.join("sub/up")).unwrap();
        let got = expand_inputs(&[d.to_str().unwrap()], JSONL_EXTENSIONS).unwrap();
        assert_eq!(got, [d.join("a.jsonl"), d.join("sub/b.jsonl")]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_reached_twice_is_refused_naming_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::fs::write(d.join("data/a.jsonl"), "").unwrap();
        std::os::unix::fs::symlink("data/a.jsonl", d.join("link.jsonl")).unwrap();
        let (a, data, link) = (d.join("data/a.jsonl"), d.join("data"), d.join("link.jsonl"));
        let s = |p: &Path| p.to_str().unwrap().to_string();
        for specs in [vec![s(&a), s(&a)], vec![s(&data), s(&a)], vec![s(&a), s(&link)]] {
            let err = expand_inputs(&specs, JSONL_EXTENSIONS).unwrap_err().to_string();
            assert!(err.contains("same file") && err.contains(&s(&a)), "{specs:?}: {err}");
        }
        // A link to a directory beside the directory: its files are the same files.
        std::os::unix::fs::symlink("data", d.join("alias")).unwrap();
        let err = expand_inputs(&[s(d)], JSONL_EXTENSIONS).unwrap_err().to_string();
        assert!(err.contains("same file"), "{err}");
    }

    #[test]
    fn missing_input_is_not_found() {
        let err = expand_inputs(&["/nonexistent/x.jsonl"], JSONL_EXTENSIONS).unwrap_err();
        assert!(matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound));
    }

    #[test]
    fn globs_are_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["x2.jsonl", "x10.jsonl", "x1.jsonl"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let pat = format!("{}/x*.jsonl", dir.path().display());
        let got = expand_inputs(&[pat], JSONL_EXTENSIONS).unwrap();
        let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["x1.jsonl", "x10.jsonl", "x2.jsonl"]);
    }
}
