//! What this CPU can run, asked once per process.

/// Whether the CPU has x86-64-v3's AVX2, BMI1, BMI2, LZCNT and POPCNT (every x86-64 server
/// CPU since about 2015).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_x86_64_v3() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static V3: AtomicU8 = AtomicU8::new(0);
    match V3.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let yes = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("lzcnt")
                && is_x86_feature_detected!("popcnt");
            V3.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
    }
}
