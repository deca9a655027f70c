//! What a JSON line's reader gives for one requested key, whichever reader read it (`json`'s
//! serde reader or the `fast_json` path it tries first).

use std::borrow::Cow;

/// The sentences of one requested key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Field<'a> {
    /// One entry for a string value, one per element for a list value.
    pub sentences: Vec<Cow<'a, str>>,
}

impl Field<'_> {
    /// The same sentences, owning their text.
    pub fn into_owned(self) -> Field<'static> {
        Field { sentences: self.sentences.into_iter().map(|s| Cow::Owned(s.into_owned())).collect() }
    }
}
