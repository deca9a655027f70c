//! Special tokens matched in the text, when the caller asks for them (tiktoken `encode` with
//! `allowed_special="all"`, Hugging Face added tokens). By default they are ordinary text.

/// Special token strings and their ids, searchable leftmost-longest.
#[derive(Clone)]
pub(crate) struct Specials {
    /// `(text, id)`, longest first.
    tokens: Vec<(String, u32)>,
    /// Whether some special starts with this byte.
    first: [bool; 256],
}

impl Specials {
    pub fn new(mut tokens: Vec<(String, u32)>) -> Specials {
        tokens.retain(|(s, _)| !s.is_empty());
        tokens.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        tokens.dedup_by(|a, b| a.0 == b.0);
        let mut first = [false; 256];
        for (s, _) in &tokens {
            first[s.as_bytes()[0] as usize] = true;
        }
        Specials { tokens, first }
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn tokens(&self) -> &[(String, u32)] {
        &self.tokens
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.tokens.iter().find(|(s, _)| s == text).map(|t| t.1)
    }

    /// The first special in `text[from..]`: `(start, end, id)`.
    pub fn find(&self, text: &str, from: usize) -> Option<(usize, usize, u32)> {
        let t = text.as_bytes();
        (from..t.len()).filter(|&i| self.first[t[i] as usize]).find_map(|i| {
            self.tokens.iter().find(|(s, _)| t[i..].starts_with(s.as_bytes())).map(|(s, id)| (i, i + s.len(), *id))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftmost_then_longest() {
        let s = Specials::new(vec![("<|a|>".into(), 1), ("<|a|>x".into(), 2), ("<|b|>".into(), 3)]);
        assert_eq!(s.find("zz<|b|><|a|>x", 0), Some((2, 7, 3)));
        assert_eq!(s.find("zz<|b|><|a|>x", 3), Some((7, 13, 2)));
        assert_eq!(s.find("<|a|", 0), None);
    }
}
