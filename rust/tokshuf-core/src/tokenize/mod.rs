//! Tokenizers behind one trait, so the pipeline does not care which one it runs.
//!
//! A spec string is parsed ([`TokenizerSpec`]), resolved into a loaded description
//! ([`TokenizerModel`]: vocabulary, split pattern, special tokens) and built into an encoder
//! ([`build`]). Callers use [`from_spec`] (or [`build`] on a model they resolved themselves);
//! which encoder serves a model is decided in [`build`] alone.
//!
//! The fast encoder and the vocabulary formats it reads (tiktoken's encodings table, rank files,
//! `tokenizer.json`, SentencePiece and Tekken files, split patterns) are the `tokshuf-bpe`
//! crate, here as [`bpe`]; this module adds specs, models and the trait around it.

mod batch;
mod byte;
mod fast_bpe;
mod hf;
mod library;
mod load;
mod model;
mod spec;
mod tiktoken;
mod tokenizer;

pub use tokshuf_bpe as bpe;

pub use batch::{encode_many, EncodedTexts};
pub use bpe::FastBpe;
pub use byte::ByteTokenizer;
pub use fast_bpe::with_caches;
pub use hf::HfTokenizer;
pub use library::{Library, LibraryEncoder};
pub use load::{build, from_spec, with_special_tokens};
pub use model::{resolve, BpeModel, HfModel, JsonText, SentencePieceModel, TokenizerModel};
pub use spec::TokenizerSpec;
pub use tiktoken::TiktokenTokenizer;
pub(crate) use tokenizer::ids_room;
pub use tokenizer::{output_identity, with_eod, Tokenizer};
