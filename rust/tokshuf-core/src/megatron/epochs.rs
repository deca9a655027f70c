//! How many epochs a GPTDataset builds, and whether the last one is shuffled separately
//! (`GPTDataset._get_num_epochs` and the 80 % rule of `_build_document_sample_shuffle_indices`).

use crate::error::{Error, Result};

/// The epoch plan of one GPTDataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPlan {
    /// Tokens in one pass over the split's sequences.
    pub tokens_per_epoch: u64,
    /// Epochs in the document index.
    pub num_epochs: u64,
    /// Whether the final epoch's documents and samples are shuffled on their own, after the rest.
    pub separate_final_epoch: bool,
    /// Samples built from the first `num_epochs - 1` epochs (only meaningful when separate).
    pub samples_sans_final_epoch: u64,
}

/// Plan the epochs for `num_samples` (`None`: exactly one epoch) samples of `seq` tokens
/// (+ `extra`) over a split holding `tokens_per_epoch` tokens.
///
/// Megatron loops forever when the split has no tokens (NVIDIA/Megatron-LM#957); this raises.
pub fn plan_epochs(tokens_per_epoch: u64, num_samples: Option<u64>, seq: u64, extra: u64) -> Result<EpochPlan> {
    if seq == 0 {
        return Err(Error::invalid("sequence_length must be positive, got 0"));
    }
    let one_epoch =
        EpochPlan { tokens_per_epoch, num_epochs: 1, separate_final_epoch: false, samples_sans_final_epoch: 0 };
    let n = match num_samples {
        Some(n) if n > 0 || tokens_per_epoch > 0 => n,
        // (`Some(0)` of no tokens: nothing asked of nothing, an empty dataset; Megatron would
        // loop forever here too.)
        _ => return Ok(one_epoch),
    };
    if tokens_per_epoch == 0 {
        return Err(Error::invalid(format!(
            "{n} samples were requested from a split that holds no tokens; give the split a larger share \
             (or more data), or request no samples from it"
        )));
    }
    let requested = n
        .checked_mul(seq)
        .and_then(|t| t.checked_add(extra))
        .ok_or_else(|| Error::invalid(format!("{n} samples of {seq} tokens overflow a 64-bit token count")))?;
    let num_epochs = requested.div_ceil(tokens_per_epoch).max(1);
    if num_epochs == 1 {
        return Ok(one_epoch);
    }
    let sans = ((num_epochs - 1) * tokens_per_epoch - extra) / seq;
    let from_final = n - sans;
    let per_epoch = (tokens_per_epoch - extra) / seq;
    if from_final > per_epoch + 1 {
        return Err(Error::invalid(format!(
            "internal epoch arithmetic failed: {from_final} samples from the final epoch exceed {per_epoch} + 1"
        )));
    }
    // `int(0.80 * per_epoch)`: a float64 product truncated.
    let threshold = (0.80 * per_epoch as f64) as u64;
    Ok(EpochPlan {
        tokens_per_epoch,
        num_epochs,
        separate_final_epoch: from_final < threshold,
        samples_sans_final_epoch: sans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanotron_tv1() {
        // doc lengths [5,3,7,2,6] (T = 23), S = 4.
        assert_eq!(plan_epochs(23, Some(3), 4, 1).unwrap().num_epochs, 1);
        let p = plan_epochs(23, Some(12), 4, 1).unwrap();
        assert_eq!((p.num_epochs, p.separate_final_epoch, p.samples_sans_final_epoch), (3, true, 11));
        let p = plan_epochs(23, Some(15), 4, 1).unwrap();
        assert_eq!((p.num_epochs, p.separate_final_epoch), (3, false));
    }

    #[test]
    fn errors_instead_of_hanging() {
        assert!(plan_epochs(0, Some(10), 4, 1).unwrap_err().to_string().contains("no tokens"));
        assert_eq!(plan_epochs(0, Some(0), 4, 1).unwrap().num_epochs, 1);
        assert_eq!(plan_epochs(0, None, 4, 1).unwrap().num_epochs, 1);
        assert!(plan_epochs(10, Some(1), 0, 1).unwrap_err().to_string().contains("sequence_length"));
    }
}
