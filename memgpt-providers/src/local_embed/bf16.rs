//! Matrix products in bfloat16 on CPUs with AVX-512 BF16 (AMD Zen 4 and later, Intel Cooper
//! Lake and Sapphire Rapids): `vdpbf16ps` multiplies pairs of bf16 values and accumulates in f32
//! at twice the rate of f32 FMA. Weights are rounded to bf16 once, when the model loads, and
//! packed for the kernel; activations are rounded as each product starts; sums stay f32. The
//! embeddings differ from f32 ones by about 1e-3 in cosine (tested).

use rayon::prelude::*;

/// Rows of the output one kernel call computes.
const MR: usize = 12;
/// Columns of the output one kernel call computes (two registers of 16).
const NR: usize = 32;
/// Rows of the output one thread task computes (the activation block stays in L2).
const MB: usize = MR * 8;

/// Whether this CPU runs the bf16 kernel.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Rounds to the nearest bfloat16, ties to even.
pub(super) fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

/// A `k x n` weight matrix packed for the kernel: panels of [`NR`] columns; within a panel, for
/// each pair of rows `(2p, 2p + 1)`, the 32 columns' pairs interleaved (`w[2p][c], w[2p+1][c]`).
/// `k` is padded to an even number with a zero row.
pub(super) struct PackedWeights {
    data: Vec<u16>,
    k: usize,
    n: usize,
}

impl PackedWeights {
    /// Packs `w` (`k x n`, row-major). `n` must be a multiple of 32.
    pub(super) fn pack(w: &[f32], k: usize, n: usize) -> Option<Self> {
        if !n.is_multiple_of(NR) || w.len() != k * n {
            return None;
        }
        let pairs = k.div_ceil(2);
        let mut data = vec![0u16; pairs * 2 * n];
        let at = |r: usize, c: usize| if r < k { w[r * n + c] } else { 0.0 };
        for panel in 0..n / NR {
            let base = panel * pairs * 2 * NR;
            for p in 0..pairs {
                let out = &mut data[base + p * 2 * NR..base + (p + 1) * 2 * NR];
                for c in 0..NR {
                    out[2 * c] = to_bf16(at(2 * p, panel * NR + c));
                    out[2 * c + 1] = to_bf16(at(2 * p + 1, panel * NR + c));
                }
            }
        }
        Some(Self { data, k, n })
    }
}

/// `dst += a · w` for `a` with `rows` rows of `w.k` values (row-major, `a_stride` apart) and
/// `dst` of `w.n` values per row (`dst_stride` apart), on every thread.
///
/// Only call when [`available`] said so.
pub(super) fn matmul_add(
    dst: &mut [f32],
    dst_stride: usize,
    a: &[f32],
    a_stride: usize,
    rows: usize,
    w: &PackedWeights,
) {
    assert!(available(), "the bf16 kernel needs AVX-512 BF16");
    assert!(
        rows == 0
            || (a.len() >= (rows - 1) * a_stride + w.k
                && dst.len() >= (rows - 1) * dst_stride + w.n)
    );
    let dst_addr = dst.as_mut_ptr() as usize;
    (0..rows.div_ceil(MB)).into_par_iter().for_each_init(
        Vec::new,
        |packed: &mut Vec<u32>, block| {
            let first = block * MB;
            let count = MB.min(rows - first);
            // SAFETY: blocks write disjoint rows of `dst` (checked long enough above); `a` is read
            // only; the CPU has the features (asserted above).
            unsafe {
                #[cfg(target_arch = "x86_64")]
                kernel::block(
                    (dst_addr as *mut f32).add(first * dst_stride),
                    dst_stride,
                    &a[first * a_stride..],
                    a_stride,
                    count,
                    w,
                    packed,
                );
            }
        },
    );
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use std::arch::x86_64::*;

    use crate::local_embed::bf16::{MR, NR, PackedWeights, to_bf16};

    /// One block of up to [`super::MB`] rows: packs them to bf16 pairs, then runs the
    /// `MR x NR` kernel over every column panel.
    #[target_feature(enable = "avx512f,avx512bf16,avx512bw")]
    pub(super) unsafe fn block(
        dst: *mut f32,
        dst_stride: usize,
        a: &[f32],
        a_stride: usize,
        rows: usize,
        w: &PackedWeights,
        packed: &mut Vec<u32>,
    ) {
        let pairs = w.k.div_ceil(2);
        let tiles = rows.div_ceil(MR);
        packed.clear();
        packed.resize(tiles * MR * pairs, 0);
        for r in 0..rows {
            let src = &a[r * a_stride..r * a_stride + w.k];
            let out = &mut packed[r * pairs..(r + 1) * pairs];
            let mut k = 0;
            while k + 32 <= w.k {
                // SAFETY: 32 floats at src[k..] and 16 pairs at out[k/2..] exist.
                unsafe {
                    let lo = _mm512_loadu_ps(src.as_ptr().add(k));
                    let hi = _mm512_loadu_ps(src.as_ptr().add(k + 16));
                    let bf = _mm512_cvtne2ps_pbh(hi, lo);
                    _mm512_storeu_si512(
                        out.as_mut_ptr().add(k / 2) as *mut __m512i,
                        std::mem::transmute::<__m512bh, __m512i>(bf),
                    );
                }
                k += 32;
            }
            while k < w.k {
                let lo = to_bf16(src[k]) as u32;
                let hi = if k + 1 < w.k {
                    to_bf16(src[k + 1]) as u32
                } else {
                    0
                };
                out[k / 2] = lo | (hi << 16);
                k += 2;
            }
        }
        let panel_len = pairs * 2 * NR;
        for panel in 0..w.n / NR {
            let b = w.data[panel * panel_len..(panel + 1) * panel_len].as_ptr();
            for tile in 0..tiles {
                let valid = MR.min(rows - tile * MR);
                // SAFETY: the tile's packed rows exist (padded with zeros); dst rows
                // tile*MR..+valid and columns panel*NR..+NR are inside the block.
                unsafe {
                    tile_kernel(
                        packed.as_ptr().add(tile * MR * pairs),
                        pairs,
                        b,
                        dst.add(tile * MR * dst_stride + panel * NR),
                        dst_stride,
                        valid,
                    );
                }
            }
        }
    }

    /// `dst[r][0..32] += sum_p a[r][p] · b[p]` for the `MR` rows of a tile (`valid` of them
    /// written back).
    #[target_feature(enable = "avx512f,avx512bf16,avx512bw")]
    unsafe fn tile_kernel(
        a: *const u32,
        pairs: usize,
        b: *const u16,
        dst: *mut f32,
        dst_stride: usize,
        valid: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        for p in 0..pairs {
            // SAFETY: p < pairs: the panel has 2 * NR values per pair, each tile row `pairs`.
            unsafe {
                let b0: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(b.add(p * 2 * NR) as *const __m512i));
                let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(
                    b.add(p * 2 * NR + NR) as *const __m512i
                ));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x: __m512bh =
                        std::mem::transmute(_mm512_set1_epi32(*a.add(r * pairs + p) as i32));
                    row[0] = _mm512_dpbf16_ps(row[0], x, b0);
                    row[1] = _mm512_dpbf16_ps(row[1], x, b1);
                }
            }
        }
        for (r, row) in acc.iter().enumerate().take(valid) {
            // SAFETY: row r < valid of the tile, 32 columns of the panel.
            unsafe {
                let out = dst.add(r * dst_stride);
                _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), row[0]));
                _mm512_storeu_ps(
                    out.add(16),
                    _mm512_add_ps(_mm512_loadu_ps(out.add(16)), row[1]),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        assert_eq!(to_bf16(-2.0), 0xc000);
        // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert!(f32::from_bits((to_bf16(f32::NAN) as u32) << 16).is_nan());
    }

    #[test]
    fn the_kernel_matches_f32_products() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16 (the f32 path is used instead)");
            return;
        }
        // Odd sizes: rows not a multiple of 12, k odd and not a multiple of 32.
        let (rows, k, n) = (29, 45, 64);
        let mut seed = 7u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed % 2000) as f32 / 1000.0 - 1.0
        };
        let a: Vec<f32> = (0..rows * k).map(|_| next()).collect();
        let w: Vec<f32> = (0..k * n).map(|_| next()).collect();
        let packed = PackedWeights::pack(&w, k, n).unwrap();
        let mut dst = vec![1.0f32; rows * n];
        matmul_add(&mut dst, n, &a, k, rows, &packed);
        for r in 0..rows {
            for c in 0..n {
                let exact: f32 = 1.0 + (0..k).map(|i| a[r * k + i] * w[i * n + c]).sum::<f32>();
                let got = dst[r * n + c];
                assert!((got - exact).abs() < 0.05, "({r}, {c}): {got} vs {exact}");
            }
        }
        assert!(
            PackedWeights::pack(&w[..k * 48], k, 48).is_none(),
            "n must be a multiple of 32"
        );
    }
}
