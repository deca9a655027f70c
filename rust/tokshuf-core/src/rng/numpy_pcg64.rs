//! numpy's `Generator(PCG64(SeedSequence(entropy)))`, bit for bit, for the few methods index
//! builders use: `shuffle` and scalar `integers`.
//!
//! The pieces are numpy's documented algorithms: `SeedSequence`'s hash-mix pool (4 words),
//! PCG64 (128-bit LCG, XSL-RR output, numpy's buffered 32-bit draws), Fisher–Yates with masked
//! rejection (`random_interval`) for shuffles and Lemire's method for bounded integers. The
//! Python tests compare every method against numpy itself.

const POOL_SIZE: usize = 4;
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const PCG_MULT: u128 = 0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645;

/// numpy's `SeedSequence` (no spawn key): entropy words mixed into a 4-word pool.
#[derive(Debug, Clone)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

/// `value` mixed with the hash constant, which then steps by `mult` (`MULT_A` while the pool is
/// filled, `MULT_B` while state is generated).
fn hashmix(value: u32, hash_const: &mut u32, mult: u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(mult);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

impl SeedSequence {
    /// `SeedSequence(entropy)` where `entropy` is already in numpy's uint32 words (each integer
    /// of the seed little-endian in 32-bit words, at least one word each).
    pub fn new(entropy: &[u32]) -> Self {
        let mut hash_const = INIT_A;
        let mut pool = [0u32; POOL_SIZE];
        for (i, slot) in pool.iter_mut().enumerate() {
            *slot = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const, MULT_A);
        }
        for src in 0..POOL_SIZE {
            for dst in 0..POOL_SIZE {
                if src != dst {
                    let h = hashmix(pool[src], &mut hash_const, MULT_A);
                    pool[dst] = mix(pool[dst], h);
                }
            }
        }
        for &word in entropy.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                let h = hashmix(word, &mut hash_const, MULT_A);
                *slot = mix(*slot, h);
            }
        }
        Self { pool }
    }

    /// `generate_state(n_words, np.uint32)`.
    pub fn generate_state_u32(&self, n_words: usize) -> Vec<u32> {
        let mut hash_const = INIT_B;
        (0..n_words).map(|i| hashmix(self.pool[i % POOL_SIZE], &mut hash_const, MULT_B)).collect()
    }

    /// `generate_state(n_words, np.uint64)` (pairs of words, little-endian).
    pub fn generate_state_u64(&self, n_words: usize) -> Vec<u64> {
        let w = self.generate_state_u32(2 * n_words);
        w.chunks_exact(2).map(|p| u64::from(p[0]) | (u64::from(p[1]) << 32)).collect()
    }
}

/// `numpy.random.Generator(numpy.random.PCG64(seed_sequence))`.
#[derive(Debug, Clone)]
pub struct NumpyGenerator {
    state: u128,
    inc: u128,
    cached_u32: Option<u32>,
}

impl NumpyGenerator {
    /// A generator seeded from a `SeedSequence`.
    pub fn from_seed_sequence(seq: &SeedSequence) -> Self {
        let v = seq.generate_state_u64(4);
        let initstate = (u128::from(v[0]) << 64) | u128::from(v[1]);
        let initseq = (u128::from(v[2]) << 64) | u128::from(v[3]);
        let mut g = Self { state: 0, inc: (initseq << 1) | 1, cached_u32: None };
        g.step();
        g.state = g.state.wrapping_add(initstate);
        g.step();
        g
    }

    #[inline]
    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        (((s >> 64) as u64) ^ (s as u64)).rotate_right((s >> 122) as u32)
    }

    /// The next 32 random bits: numpy splits each 64-bit draw, low half first.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if let Some(v) = self.cached_u32.take() {
            return v;
        }
        let n = self.next_u64();
        self.cached_u32 = Some((n >> 32) as u32);
        n as u32
    }

    /// numpy's `random_interval(max)`: uniform in `0..=max`.
    fn interval(&mut self, max: u64) -> u64 {
        super::random_interval(self, max, Self::next_u32, Self::next_u64)
    }

    /// `Generator.shuffle(x)` for a one-dimensional array.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.interval(i as u64) as usize;
            x.swap(i, j);
        }
    }

    /// Scalar `Generator.integers(low, high)` (int64, `high` excluded).
    ///
    /// # Panics
    /// If `low >= high` (numpy raises `ValueError`).
    pub fn integers(&mut self, low: i64, high: i64) -> i64 {
        assert!(low < high, "integers: low ({low}) >= high ({high})");
        let rng = (high - 1).wrapping_sub(low) as u64;
        let off = low as u64;
        off.wrapping_add(self.bounded(rng)) as i64
    }

    /// numpy's `random_bounded_uint64` (Lemire, unmasked): uniform in `0..=rng`.
    fn bounded(&mut self, rng: u64) -> u64 {
        if rng == 0 {
            return 0;
        }
        if rng <= u64::from(u32::MAX) {
            if rng == u64::from(u32::MAX) {
                return u64::from(self.next_u32());
            }
            let rng = rng as u32;
            let excl = rng + 1;
            let mut m = u64::from(self.next_u32()) * u64::from(excl);
            let mut leftover = m as u32;
            if leftover < excl {
                let threshold = (u32::MAX - rng) % excl;
                while leftover < threshold {
                    m = u64::from(self.next_u32()) * u64::from(excl);
                    leftover = m as u32;
                }
            }
            return m >> 32;
        }
        if rng == u64::MAX {
            return self.next_u64();
        }
        let excl = rng + 1;
        let mut m = u128::from(self.next_u64()) * u128::from(excl);
        let mut leftover = m as u64;
        if leftover < excl {
            let threshold = (u64::MAX - rng) % excl;
            while leftover < threshold {
                m = u128::from(self.next_u64()) * u128::from(excl);
                leftover = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `default_rng(seed)` for a seed below 2^32 (one entropy word).
    fn rng(seed: u32) -> NumpyGenerator {
        NumpyGenerator::from_seed_sequence(&SeedSequence::new(&[seed]))
    }

    /// `Generator.permutation(n)`.
    fn permutation(g: &mut NumpyGenerator, n: u64) -> Vec<u64> {
        let mut v: Vec<u64> = (0..n).collect();
        g.shuffle(&mut v);
        v
    }

    // Expected values printed by numpy 2.4 (`np.random.Generator(np.random.PCG64(seed))`).
    #[test]
    fn matches_numpy() {
        let mut g = rng(0);
        assert_eq!([g.next_u64(), g.next_u64()], [11749869230777074271, 4976686463289251617]);
        assert_eq!(permutation(&mut rng(1), 10), [8, 4, 7, 0, 1, 2, 5, 9, 6, 3]);
        let mut g = rng(12345);
        let ints: Vec<i64> = (0..5).map(|_| g.integers(0, 7)).collect();
        assert_eq!(ints, [4, 1, 5, 2, 1]);
        assert_eq!(g.integers(0, 1 << 40), 743549873828);
        assert_eq!(permutation(&mut g, 5), [4, 3, 0, 1, 2]);
        // The words of `SeedSequence([3, 2**33])`.
        let seq = SeedSequence::new(&[3, 0, 2]);
        assert_eq!(permutation(&mut NumpyGenerator::from_seed_sequence(&seq), 8), [5, 1, 2, 3, 6, 4, 7, 0]);
    }

    #[test]
    fn shuffle_is_a_permutation_and_seed_dependent() {
        let a = permutation(&mut rng(1), 1000);
        let b = permutation(&mut rng(2), 1000);
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_ne!(a, b);
        assert_eq!(a, permutation(&mut rng(1), 1000));
    }

    #[test]
    fn integers_stay_in_range() {
        let mut g = rng(7);
        for (lo, hi) in [(0, 1), (3, 10), (-5, 5), (0, 1 << 40)] {
            for _ in 0..200 {
                let v = g.integers(lo, hi);
                assert!((lo..hi).contains(&v));
            }
        }
    }
}
