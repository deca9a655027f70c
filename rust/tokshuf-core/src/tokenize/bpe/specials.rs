//! Special tokens matched in the text, when the caller asks for them (tiktoken `encode` with
//! `allowed_special="all"`, Hugging Face added tokens). By default they are ordinary text.

/// Special token strings and their ids, searchable leftmost-longest.
#[derive(Clone)]
pub(crate) struct Specials {
    /// `(text, id)`, longest first.
    tokens: Vec<(String, u32)>,
    /// Whether some special starts with this byte.
    first: [bool; 256],
    /// Those bytes, when there are at most three (`<` for the usual `<|...|>` tokens): the scan
    /// then jumps between them with `memchr` instead of testing every byte of the text.
    firsts: Vec<u8>,
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
        let firsts = (0..=255u8).filter(|&b| first[b as usize]).collect();
        Specials { tokens, first, firsts }
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
        let at = |i: usize| {
            self.tokens.iter().find(|(s, _)| t[i..].starts_with(s.as_bytes())).map(|(s, id)| (i, i + s.len(), *id))
        };
        let rest = t.get(from..)?;
        match self.firsts[..] {
            [a] => memchr::memchr_iter(a, rest).find_map(|i| at(from + i)),
            [a, b] => memchr::memchr2_iter(a, b, rest).find_map(|i| at(from + i)),
            [a, b, c] => memchr::memchr3_iter(a, b, c, rest).find_map(|i| at(from + i)),
            _ => (from..t.len()).filter(|&i| self.first[t[i] as usize]).find_map(at),
        }
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
        assert_eq!(s.find("<|a|", 9), None);
    }

    #[test]
    fn any_number_of_first_bytes() {
        let names = ["<a>", "[b]", "{c}", "(d)", "<e>"];
        for n in 1..=names.len() {
            let s = Specials::new(names[..n].iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect());
            let text: String = names.iter().rev().map(|t| format!("x{t}")).collect();
            // Every special the set has, leftmost first, and nothing else.
            let mut found = Vec::new();
            let mut pos = 0;
            while let Some((a, b, id)) = s.find(&text, pos) {
                assert_eq!(&text[a..b], names[id as usize]);
                found.push(id);
                pos = b;
            }
            let expected: Vec<u32> = (0..names.len() as u32).rev().filter(|&i| (i as usize) < n).collect();
            assert_eq!(found, expected, "{n} specials");
        }
    }
}
