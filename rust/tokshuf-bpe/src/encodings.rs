//! tiktoken's data: the split patterns of OpenAI's encodings, their special tokens, and the rank
//! files (`base64(token) rank` per line, as OpenAI publishes them and Llama 3 ships them).
//!
//! The binary embeds the ranks of OpenAI's encodings in a compact form (`assets/tiktoken/`,
//! written by its `make_ranks.py`) that loads without decoding: each token's length, then the
//! tokens. A test writes each back as a `.tiktoken` file and checks it against the SHA-256 that
//! `tiktoken` pins, so what is loaded is exactly what `tiktoken` downloads, with no hash or
//! check at run time.

use std::sync::{Arc, OnceLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::pattern::Pattern;
use crate::vocab::TokenList;

/// One of OpenAI's encodings.
#[derive(Debug)]
pub struct KnownEncoding {
    /// tiktoken's name.
    pub name: &'static str,
    /// Other names tiktoken accepts for it (`gpt2`).
    pub aliases: &'static [&'static str],
    pub pattern: Pattern,
    /// SHA-256 of the `.tiktoken` file, as pinned by `tiktoken`.
    pub sha256: &'static str,
    /// The largest mergeable rank (ranks are `0..=last_rank` minus the special ids).
    pub last_rank: u32,
    /// Special tokens and their ids, besides the reserved ones.
    specials: &'static [(&'static str, u32)],
    /// Ids of the reserved specials `<|reserved_ID|>` (o200k_harmony's 1,075 placeholders).
    reserved: std::ops::Range<u32>,
    /// The ranks, in the compact form of `assets/tiktoken/make_ranks.py`.
    file: &'static [u8],
}

const R50K_FILE: &[u8] = include_bytes!("../assets/tiktoken/r50k_base.ranks");
const P50K_FILE: &[u8] = include_bytes!("../assets/tiktoken/p50k_base.ranks");
const CL100K_FILE: &[u8] = include_bytes!("../assets/tiktoken/cl100k_base.ranks");
const O200K_FILE: &[u8] = include_bytes!("../assets/tiktoken/o200k_base.ranks");

const ENDOFTEXT: &str = "<|endoftext|>";

const P50K_BASE: KnownEncoding = KnownEncoding {
    name: "p50k_base",
    aliases: &[],
    pattern: Pattern::Gpt2,
    sha256: "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    last_rank: 50280,
    specials: &[(ENDOFTEXT, 50256)],
    reserved: 0..0,
    file: P50K_FILE,
};

const O200K_BASE: KnownEncoding = KnownEncoding {
    name: "o200k_base",
    aliases: &[],
    pattern: Pattern::O200k,
    sha256: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    last_rank: 199997,
    specials: &[(ENDOFTEXT, 199999), ("<|endofprompt|>", 200018)],
    reserved: 0..0,
    file: O200K_FILE,
};

/// The encodings `tiktoken:NAME` accepts: the one table of their names (with
/// [`encoding_names`]), read by the CLI's help and the Python package too.
pub static KNOWN_ENCODINGS: [KnownEncoding; 6] = [
    KnownEncoding {
        name: "r50k_base",
        aliases: &["gpt2"],
        pattern: Pattern::Gpt2,
        sha256: "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        last_rank: 50255,
        specials: &[(ENDOFTEXT, 50256)],
        reserved: 0..0,
        file: R50K_FILE,
    },
    P50K_BASE,
    // p50k_base's ranks (the same file) with the fill-in-the-middle specials.
    KnownEncoding {
        name: "p50k_edit",
        specials: &[
            (ENDOFTEXT, 50256),
            ("<|fim_prefix|>", 50281),
            ("<|fim_middle|>", 50282),
            ("<|fim_suffix|>", 50283),
        ],
        ..P50K_BASE
    },
    KnownEncoding {
        name: "cl100k_base",
        aliases: &[],
        pattern: Pattern::Cl100k,
        sha256: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        last_rank: 100255,
        specials: &[
            (ENDOFTEXT, 100257),
            ("<|fim_prefix|>", 100258),
            ("<|fim_middle|>", 100259),
            ("<|fim_suffix|>", 100260),
            ("<|endofprompt|>", 100276),
        ],
        reserved: 0..0,
        file: CL100K_FILE,
    },
    O200K_BASE,
    // o200k_base's ranks (the same file) with the harmony chat format's specials, as tiktoken's
    // `openai_public.py` defines them; 200018 keeps both of its names there, and here.
    KnownEncoding {
        name: "o200k_harmony",
        specials: &[
            ("<|startoftext|>", 199998),
            (ENDOFTEXT, 199999),
            ("<|reserved_200000|>", 200000),
            ("<|reserved_200001|>", 200001),
            ("<|return|>", 200002),
            ("<|constrain|>", 200003),
            ("<|reserved_200004|>", 200004),
            ("<|channel|>", 200005),
            ("<|start|>", 200006),
            ("<|end|>", 200007),
            ("<|message|>", 200008),
            ("<|reserved_200009|>", 200009),
            ("<|reserved_200010|>", 200010),
            ("<|reserved_200011|>", 200011),
            ("<|call|>", 200012),
            ("<|endofprompt|>", 200018),
        ],
        reserved: 200013..201088,
        ..O200K_BASE
    },
];

impl KnownEncoding {
    /// Every special token and its id.
    pub fn specials(&self) -> Vec<(String, u32)> {
        let named = self.specials.iter().map(|&(t, id)| (t.to_string(), id));
        named.chain(self.reserved.clone().map(|id| (format!("<|reserved_{id}|>"), id))).collect()
    }

    /// Whether `id` is one of the specials (which have no rank).
    fn is_special(&self, id: u32) -> bool {
        self.reserved.contains(&id) || self.specials.iter().any(|&(_, s)| s == id)
    }

    /// The embedded ranks: the ids `0..=last_rank` that are no special, in order, and their tokens.
    fn embedded_tokens(&self) -> Option<TokenList> {
        let (n, rest) = self.file.split_first_chunk::<4>()?;
        let n = u32::from_le_bytes(*n) as usize;
        let (lens, bytes) = (rest.get(..n)?, rest.get(n..)?);
        let mut tokens = TokenList::with_capacity(n, bytes.len());
        let (mut start, mut ranks) = (0, (0..=self.last_rank).filter(|&r| !self.is_special(r)));
        for &len in lens {
            let end = start + usize::from(len);
            tokens.push(bytes.get(start..end)?, ranks.next()?);
            start = end;
        }
        (start == bytes.len() && ranks.next().is_none()).then_some(tokens)
    }
}

/// SHA-256 of Llama 3's `tokenizer.model` (a rank file of 128,000 tokens; Meta's llama-models).
pub const LLAMA3_SHA256: &str = "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55";

/// Meta's 256 Llama 3 special tokens at ids 128000..128256 (llama-models `tokenizer.py`):
/// `<|begin_of_text|>`, `<|end_of_text|>` (the end of a document), the header and turn tokens,
/// and reserved ones.
pub fn llama3_specials() -> Vec<(String, u32)> {
    let named = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>",
        "<|step_id|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eom_id|>",
        "<|eot_id|>",
        "<|python_tag|>",
        "<|image|>",
    ];
    let reserved = (2..).map(|k| format!("<|reserved_special_token_{k}|>"));
    named.iter().map(|s| s.to_string()).chain(reserved).take(256).zip(128_000..).collect()
}

/// Whether `sha256` is that of a rank file the tests check: OpenAI's encodings, Llama 3's.
fn is_pinned(sha256: &str) -> bool {
    sha256 == LLAMA3_SHA256 || known_by_sha256(sha256).is_some()
}

/// The encoding called `name` or one of its aliases (`gpt2` is tiktoken's alias of r50k_base's
/// ranks and regex).
pub fn known_encoding(name: &str) -> Option<&'static KnownEncoding> {
    KNOWN_ENCODINGS.iter().find(|e| e.name == name || e.aliases.contains(&name))
}

/// Every name [`known_encoding`] accepts, each encoding's name followed by its aliases.
pub fn encoding_names() -> Vec<&'static str> {
    KNOWN_ENCODINGS.iter().flat_map(|e| std::iter::once(e.name).chain(e.aliases.iter().copied())).collect()
}

/// The known encoding whose rank file has this SHA-256 (p50k_edit shares p50k_base's file).
pub fn known_by_sha256(sha256: &str) -> Option<&'static KnownEncoding> {
    KNOWN_ENCODINGS.iter().find(|e| e.sha256 == sha256)
}

/// An encoding embedded in the binary, by its tiktoken name (`cl100k_base`, ...) or an alias: its
/// entry of [`KNOWN_ENCODINGS`] (specials, pattern) and the ranks of tiktoken's pinned file.
pub fn embedded(name: &str) -> Result<(&'static KnownEncoding, Arc<RankTable>)> {
    let known = known_encoding(name).ok_or_else(|| {
        Error::invalid(format!("unknown tiktoken encoding {name:?} (expected one of: {})", encoding_names().join(", ")))
    })?;
    Ok((known, embedded_ranks(known)?))
}

/// A mergeable-rank table: tokens and their ranks, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankTable {
    /// (token bytes, rank), in file order.
    pub tokens: TokenList,
    /// SHA-256 of the table serialized as a `.tiktoken` file.
    pub sha256: String,
}

impl RankTable {
    /// Parse a `.tiktoken` file's contents (tiktoken's rules: blank lines ignored, each other
    /// line `base64 rank`). `origin` names the file in errors.
    ///
    /// The table must be one byte-level BPE can encode every text with: each of the 256 single
    /// bytes has a rank, no token or rank appears twice, and the ranks are exactly `0..n`. (A
    /// file whose SHA-256 is one that tiktoken or Meta pins is that file, which the tests check.)
    pub fn parse(contents: &[u8], origin: &str) -> Result<Self> {
        let tokens = parse_lines(contents).map_err(|e| Error::invalid(format!("{origin}: {e}")))?;
        let table = Self { tokens, sha256: sha256_hex(contents) };
        if !is_pinned(&table.sha256) {
            table.check(origin)?;
        }
        Ok(table)
    }

    fn check(&self, origin: &str) -> Result<()> {
        let bad = |what: String| Error::invalid(format!("{origin}: not a usable rank file: {what}"));
        let n = self.tokens.len();
        let text = |t: &[u8]| format!("{:?}", String::from_utf8_lossy(t));
        // The first token of each rank: below n in a table, others (a gap, reported below) in a map.
        let mut first = vec![u32::MAX; n];
        let mut high: rustc_hash::FxHashMap<u32, usize> = Default::default();
        let mut tokens: rustc_hash::FxHashMap<&[u8], u32> = Default::default();
        tokens.reserve(n);
        let mut single = [false; 256];
        for (i, (token, rank)) in self.tokens.iter().enumerate() {
            let earlier = match first.get_mut(rank as usize) {
                Some(slot) if *slot == u32::MAX => {
                    *slot = i as u32;
                    None
                }
                Some(slot) => Some(*slot as usize),
                None => high.insert(rank, i),
            };
            if let Some(j) = earlier {
                let first = self.tokens.get(j).0;
                return Err(bad(format!("rank {rank} is given to two tokens, {} and {}", text(first), text(token))));
            }
            if let Some(first) = tokens.insert(token, rank) {
                return Err(bad(format!("the token {} appears twice, with ranks {first} and {rank}", text(token))));
            }
            if let [b] = token {
                single[*b as usize] = true;
            }
        }
        let missing: Vec<String> = (0..=255u8).filter(|&b| !single[b as usize]).map(|b| format!("0x{b:02x}")).collect();
        if !missing.is_empty() {
            return Err(bad(format!(
                "{} of the 256 single bytes have no rank ({}{}): byte-level BPE needs all of them to encode \
                 any text",
                missing.len(),
                missing[..missing.len().min(8)].join(", "),
                if missing.len() > 8 { ", ..." } else { "" }
            )));
        }
        // n distinct ranks are exactly 0..n when none is n or more.
        if let Some((&rank, &i)) = high.iter().min() {
            let gap = first.iter().position(|&f| f == u32::MAX).unwrap_or(0);
            return Err(bad(format!(
                "rank {rank} (token {}) leaves rank {gap} unused: the {n} ranks must be 0..{n} with none missing",
                text(self.tokens.get(i).0)
            )));
        }
        Ok(())
    }

    /// The table as a `.tiktoken` file (byte-identical to the original for OpenAI's files).
    pub fn to_tiktoken_file(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.tokens.len() * 16);
        for (token, rank) in self.tokens.iter() {
            out.extend_from_slice(STANDARD.encode(token).as_bytes());
            out.push(b' ');
            out.extend_from_slice(rank.to_string().as_bytes());
            out.push(b'\n');
        }
        out
    }

    /// The largest rank plus one.
    pub fn n_vocab(&self) -> u64 {
        self.tokens.ids().iter().map(|&r| u64::from(r) + 1).max().unwrap_or(0)
    }
}

/// The lines of a `.tiktoken` file, decoded (tiktoken's reading: blank lines are skipped, each
/// other line is a base64 token and its rank, separated by whitespace). The error says what is
/// wrong, and where.
pub(crate) fn parse_lines(contents: &[u8]) -> std::result::Result<TokenList, String> {
    let lines = memchr::memchr_iter(b'\n', contents).count() + 1;
    let mut tokens = TokenList::with_capacity(lines, contents.len() / 2);
    for (i, line) in contents.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let bad = |what: &str| format!("line {}: {what} (expected `base64 rank`)", i + 1);
        let mut parts = line.split(u8::is_ascii_whitespace).filter(|p| !p.is_empty());
        let (Some(token), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(if line.is_ascii() { "not two fields" } else { "not ASCII" }));
        };
        let rank =
            std::str::from_utf8(rank).ok().and_then(|r| r.parse::<u32>().ok()).ok_or_else(|| bad("invalid rank"))?;
        tokens.push_with(rank, |out| STANDARD.decode_vec(token, out)).map_err(|_| bad("invalid base64"))?;
    }
    if tokens.is_empty() {
        return Err("no ranks (is it a .tiktoken file?)".into());
    }
    Ok(tokens)
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The rank table of a known encoding, from the copy embedded in the binary; computed once per
/// process.
pub fn embedded_ranks(enc: &'static KnownEncoding) -> Result<Arc<RankTable>> {
    static CACHE: [OnceLock<Arc<RankTable>>; KNOWN_ENCODINGS.len()] =
        [const { OnceLock::new() }; KNOWN_ENCODINGS.len()];
    let slot = KNOWN_ENCODINGS.iter().position(|e| std::ptr::eq(e, enc)).expect("a known encoding");
    if let Some(t) = CACHE[slot].get() {
        return Ok(Arc::clone(t));
    }
    let tokens = enc
        .embedded_tokens()
        .ok_or_else(|| Error::invalid(format!("the embedded {} ranks do not match the encoding's ids", enc.name)))?;
    let table = RankTable { tokens, sha256: enc.sha256.to_string() };
    Ok(Arc::clone(CACHE[slot].get_or_init(|| Arc::new(table))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_files_are_tiktokens_pinned_files() {
        for enc in &KNOWN_ENCODINGS {
            let t = embedded_ranks(enc).unwrap();
            let file = t.to_tiktoken_file();
            assert_eq!(sha256_hex(&file), enc.sha256, "{}", enc.name);
            // What loading skips is what parsing a downloaded file checks.
            assert_eq!(*t, RankTable::parse(&file, enc.name).unwrap(), "{}", enc.name);
            assert_eq!(t.n_vocab(), u64::from(enc.last_rank) + 1, "{}", enc.name);
            // p50k's ranks skip its <|endoftext|> (50256): a gap the check of an unknown file refuses.
            if t.tokens.len() as u64 == t.n_vocab() {
                t.check(enc.name).unwrap();
            }
        }
    }

    #[test]
    fn llama3s_pinned_file_passes_the_checks_it_skips() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tokenizers/llama3_tokenizer.model.zst");
        let file = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
        let table = RankTable::parse(&file, "llama3").unwrap();
        assert_eq!(table.sha256, LLAMA3_SHA256);
        assert!(is_pinned(&table.sha256));
        table.check("llama3").unwrap();
        assert_eq!(table.n_vocab(), 128_000);
    }

    /// (Every embedded table round-trips through its file: see the test above.)
    #[test]
    fn embedded_r50k_is_gpt2s() {
        let t = embedded_ranks(known_encoding("gpt2").unwrap()).unwrap();
        assert_eq!(t.tokens.len(), 50256);
        assert_eq!(t.tokens.get(0), (&b"!"[..], 0));
        assert_eq!(t.tokens.get(256).0, b" t"); // the first merge of GPT-2
    }

    #[test]
    fn parse_errors_name_the_line() {
        let e = RankTable::parse(b"IQ== 0\nnot-base64! 1\n", "f.tiktoken").unwrap_err().to_string();
        assert!(e.contains("f.tiktoken: line 2: invalid base64"), "{e}");
        assert!(RankTable::parse(b"\n\n", "f").is_err());
    }

    /// A valid table: the 256 bytes, then merges, ranks in file order.
    fn table(merges: &[&[u8]]) -> Vec<(Vec<u8>, u32)> {
        let tokens = (0..=255u8).map(|b| vec![b]).chain(merges.iter().map(|m| m.to_vec()));
        tokens.zip(0..).collect()
    }

    fn file(entries: &[(Vec<u8>, u32)]) -> Vec<u8> {
        RankTable { tokens: entries.iter().map(|(t, r)| (t, *r)).collect(), sha256: String::new() }.to_tiktoken_file()
    }

    #[test]
    fn rank_files_that_cannot_encode_every_text_are_refused_naming_the_file() {
        let good = table(&[b"ab", b"abc"]);
        assert!(RankTable::parse(&file(&good), "f.tiktoken").is_ok());
        let mut dup_rank = good.clone();
        dup_rank[257].1 = 256;
        let mut dup_token = good.clone();
        dup_token[257].0 = b"ab".to_vec();
        let mut gap = good.clone();
        gap[257].1 = 300;
        let mut no_byte = good.clone();
        no_byte.remove(0x41);
        for e in &mut no_byte[0x41..] {
            e.1 -= 1;
        }
        for (t, want) in [
            (dup_rank, "rank 256 is given to two tokens"),
            (dup_token, "appears twice"),
            (gap, "rank 300 (token \"abc\") leaves rank 257 unused"),
            (no_byte, "1 of the 256 single bytes have no rank (0x41)"),
        ] {
            let e = RankTable::parse(&file(&t), "f.tiktoken").unwrap_err().to_string();
            assert!(e.contains("f.tiktoken") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn parses_lines_and_reports_errors() {
        let r = parse_lines(b"IQ== 0\r\nIg== 1\n\n").unwrap();
        assert_eq!(r, vec![(b"!".to_vec(), 0), (b"\"".to_vec(), 1)].into());
        for bad in [&b"IQ==\n"[..], b"IQ== x\n", b"!!! 0\n", b"IQ== 0 1\n", b"\n"] {
            assert!(parse_lines(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_name_lists_the_choices() {
        let msg = embedded("cl100k").err().unwrap().to_string();
        assert!(msg.contains("cl100k_base") && msg.contains("o200k_base"), "{msg}");
    }
}
