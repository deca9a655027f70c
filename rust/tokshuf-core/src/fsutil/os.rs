//! What the commit record and the staging of a set both ask of the operating system: whether a
//! writer process is still alive, and that renames in a directory are durable.

use std::path::Path;

/// Make the renames in `dir` durable (best effort: not every filesystem syncs directories).
pub(crate) fn sync_dir(dir: &Path) {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks whether the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
