//! Megatron-LM's indexed dataset (`MMIDIDX` version 1): a `.bin` of raw token ids and an
//! `.idx` describing sequences and documents. Byte-compatible with Megatron's writer.

mod column;
mod format;
mod merge;
mod pinned;
mod reader;
mod source;
mod writer;

pub use format::{bin_path, idx_path, Header, Layout, HEADER_LEN, MAGIC, VERSION};
pub use merge::{check_outputs as check_merge_outputs, list_prefixes, merge, merge_inputs, merge_staged};
pub use pinned::{local_pair, open_token_file};
pub use reader::{IndexedDataset, Validate};
pub use source::{Mapping, RemoteBin};
pub use writer::{write_index_file, IndexedDatasetWriter, WriteSummary};
