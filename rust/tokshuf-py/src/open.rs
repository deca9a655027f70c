//! What a Python object holds until it is finished, committed or aborted (a writer, a staged
//! set): every call after that is an error that says so.

use tokshuf_core::Error;

/// The error of a writer's call after `finish` or `abort`.
pub const WRITER_GONE: &str = "the writer is already finished or aborted";

pub struct Open<T> {
    inner: Option<T>,
    /// The error's text once it is gone.
    gone: &'static str,
}

impl<T> Open<T> {
    pub fn new(inner: T, gone: &'static str) -> Self {
        Self { inner: Some(inner), gone }
    }

    pub fn get(&mut self) -> Result<&mut T, Error> {
        self.inner.as_mut().ok_or_else(|| Error::invalid(self.gone))
    }

    /// Take it out, to finish or commit it.
    pub fn take(&mut self) -> Result<T, Error> {
        self.inner.take().ok_or_else(|| Error::invalid(self.gone))
    }

    pub fn peek(&self) -> Option<&T> {
        self.inner.as_ref()
    }

    /// Drop it (a writer's temporary files are removed).
    pub fn abort(&mut self) {
        self.inner = None;
    }
}
