//! numpy's legacy `RandomState`, as far as Megatron uses it: MT19937 seeded with
//! `init_genrand(seed)`, `random_interval` (mask + rejection) and `shuffle` (backward
//! Fisher–Yates). Every permutation Megatron draws comes from these three pieces, so they must
//! match numpy word for word; no other range reduction (Lemire, modulo) would.

use crate::cancel::Cancel;
use crate::error::Result;

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// `numpy.random.RandomState(seed)` restricted to the calls Megatron makes.
#[derive(Clone)]
pub struct RandomState {
    mt: Box<[u32; N]>,
    pos: usize,
}

impl std::fmt::Debug for RandomState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomState").field("pos", &self.pos).finish_non_exhaustive()
    }
}

impl RandomState {
    /// Seed as numpy does for an integer seed in `[0, 2^32)` (the reference `init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut mt = Box::new([0u32; N]);
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        // `pos = N` makes the first draw regenerate the whole state, as the reference does.
        Self { mt, pos: N }
    }

    fn twist(&mut self) {
        let mt = &mut *self.mt;
        let mag = |y: u32| if y & 1 == 0 { 0 } else { MATRIX_A };
        for k in 0..N - M {
            let y = (mt[k] & UPPER_MASK) | (mt[k + 1] & LOWER_MASK);
            mt[k] = mt[k + M] ^ (y >> 1) ^ mag(y);
        }
        for k in N - M..N - 1 {
            let y = (mt[k] & UPPER_MASK) | (mt[k + 1] & LOWER_MASK);
            mt[k] = mt[k + M - N] ^ (y >> 1) ^ mag(y);
        }
        let y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
        mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ mag(y);
        self.pos = 0;
    }

    /// `genrand_int32`: the next raw 32-bit word.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.twist();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// numpy's legacy `next_uint64`: two words, the first one high.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_u32());
        (hi << 32) | u64::from(self.next_u32())
    }

    /// `random_interval(max)`: uniform in `[0, max]`.
    #[inline]
    pub fn random_interval(&mut self, max: u64) -> u64 {
        super::random_interval(self, max, Self::next_u32, Self::next_u64)
    }

    /// `RandomState.shuffle(x)` for a 1-D array: the same permutation for every dtype.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        let never = Cancel::new();
        self.shuffle_cancellable(x, &never).expect("an unset flag never cancels");
    }

    /// [`RandomState::shuffle`], polling `cancel` every few thousand swaps.
    pub fn shuffle_cancellable<T>(&mut self, x: &mut [T], cancel: &Cancel) -> Result<()> {
        // Swaps are random accesses over the whole array; on large arrays they are bound by
        // memory latency, so draw a block of targets first and prefetch them before swapping.
        const BLOCK: usize = 4096;
        const AHEAD: usize = 16;
        let n = x.len();
        if n < 2 {
            return Ok(());
        }
        let mut targets = Vec::with_capacity(BLOCK.min(n));
        let mut i = n - 1;
        while i >= 1 {
            cancel.check()?;
            let lo = i.saturating_sub(BLOCK - 1).max(1);
            targets.clear();
            targets.extend((lo..=i).rev().map(|k| self.random_interval(k as u64) as usize));
            for (step, &j) in targets.iter().enumerate() {
                if let Some(&ahead) = targets.get(step + AHEAD) {
                    prefetch(x, ahead);
                }
                x.swap(i - step, j);
            }
            i = lo - 1;
        }
        Ok(())
    }
}

#[inline(always)]
fn prefetch<T>(x: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        debug_assert!(i < x.len());
        // SAFETY: a prefetch is a hint that never faults; the address is inside `x` because
        // every target drawn for position k is at most k < x.len().
        unsafe { _mm_prefetch::<_MM_HINT_T0>(x.as_ptr().wrapping_add(i).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_mt19937_outputs_and_numpy_seed_0_words_and_shuffles() {
        // init_genrand(5489) is the reference generator's default: its 1st and 10000th outputs.
        let mut rs = RandomState::new(5489);
        assert_eq!(rs.next_u32(), 3_499_211_612);
        for _ in 1..9999 {
            rs.next_u32();
        }
        assert_eq!(rs.next_u32(), 4_123_659_995);
        // numpy: RandomState(0).randint(2**32, dtype=np.uint64)-style raw words and shuffles
        // (the fixtures' vectors, checked in full by the Python tests).
        let mut rs = RandomState::new(0);
        assert_eq!(rs.next_u32(), 2_357_136_044);
        assert_eq!(rs.next_u32(), 2_546_248_239);
        let mut x: Vec<i32> = (0..10).collect();
        RandomState::new(0).shuffle(&mut x);
        assert_eq!(x, [2, 8, 4, 9, 1, 6, 7, 3, 0, 5]);
    }

    #[test]
    fn wide_intervals_use_two_words_high_first() {
        let (mut a, mut b) = (RandomState::new(3), RandomState::new(3));
        let max = (1u64 << 40) - 5;
        let v = a.random_interval(max);
        let expect = loop {
            let w = b.next_u64() & ((1u64 << 40) - 1);
            if w <= max {
                break w;
            }
        };
        assert_eq!(v, expect);
    }
}
