//! What this x86-64 CPU can run, asked once per process.

const AVX2: u8 = 1;
const V3: u8 = 2;
const VBMI: u8 = 8;
/// Set once the flags are known.
const KNOWN: u8 = 4;

static FLAGS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The flags above for this CPU: one load once known (it is asked per 64-byte window of text).
#[inline(always)]
fn flags() -> u8 {
    let f = FLAGS.load(std::sync::atomic::Ordering::Relaxed);
    if f & KNOWN != 0 {
        return f;
    }
    detect()
}

#[cold]
#[inline(never)]
fn detect() -> u8 {
    let avx2 = is_x86_feature_detected!("avx2");
    let v3 = avx2
        && is_x86_feature_detected!("bmi1")
        && is_x86_feature_detected!("bmi2")
        && is_x86_feature_detected!("lzcnt")
        && is_x86_feature_detected!("popcnt");
    let vbmi = is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vbmi");
    let f = KNOWN | if avx2 { AVX2 } else { 0 } | if v3 { V3 } else { 0 } | if vbmi { VBMI } else { 0 };
    FLAGS.store(f, std::sync::atomic::Ordering::Relaxed);
    f
}

/// Whether the CPU has AVX2.
#[inline(always)]
pub(crate) fn has_avx2() -> bool {
    flags() & AVX2 != 0
}

/// Whether the CPU has x86-64-v3's AVX2, BMI1, BMI2, LZCNT and POPCNT (every x86-64 server
/// CPU since about 2015).
#[inline(always)]
pub(crate) fn has_x86_64_v3() -> bool {
    flags() & V3 != 0
}

/// Whether the CPU has AVX-512's F, BW and VBMI (byte permutes across a whole register).
#[inline(always)]
pub(crate) fn has_avx512_vbmi() -> bool {
    flags() & VBMI != 0
}
