//! The encoder's numeric kernels: matrix products (the `gemm` crate), and fused row operations
//! (bias, residual, layer norm, GELU, softmax) written as plain loops that the compiler
//! vectorises. Each row kernel is compiled twice, for any x86-64 and for AVX2 + FMA, and the
//! faster one is chosen once at run time.

use gemm::Parallelism;

/// Row kernels, as function pointers chosen for this CPU.
#[derive(Clone, Copy)]
pub(super) struct RowKernels {
    /// `row = layer_norm(row) * weight + bias` (mean and variance over the row).
    pub(super) layer_norm: fn(&mut [f32], &[f32], &[f32], f32),
    /// `x = gelu(x)` (the exact, erf-based GELU).
    pub(super) gelu: fn(&mut [f32]),
    /// `row = softmax(row)`.
    pub(super) softmax: fn(&mut [f32]),
}

impl std::fmt::Debug for RowKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowKernels")
    }
}

/// The row kernels for this CPU.
pub(super) fn row_kernels() -> RowKernels {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return RowKernels {
                layer_norm: |r, w, b, e| unsafe { avx2::layer_norm(r, w, b, e) },
                gelu: |x| unsafe { avx2::gelu(x) },
                softmax: |r| unsafe { avx2::softmax(r) },
            };
        }
    }
    RowKernels {
        layer_norm: generic::layer_norm,
        gelu: generic::gelu,
        softmax: generic::softmax,
    }
}

/// The bodies, inlined into each instantiation.
mod body {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;

    /// `e^x` for `x <= 0` (softmax after the maximum is subtracted; GELU's `e^(-z^2)`), with a
    /// relative error under 3e-7; `e^-87` below -87. Branch-free integer tricks only, so loops
    /// over it vectorise.
    #[inline(always)]
    pub(super) fn exp_neg(x: f32) -> f32 {
        // Rounds to the nearest integer by adding 1.5 * 2^23 (the integer lands in the low bits).
        const MAGIC: f32 = 12_582_912.0;
        // ln 2 in two parts (Cody and Waite): n * LN2_HI is exact, so the reduction loses
        // nothing however large n is.
        const LN2_HI: f32 = 0.693_359_4;
        const LN2_LO: f32 = -2.121_944_4e-4;
        let x = x.max(-87.0);
        let shifted = x * LOG2_E + MAGIC;
        let n = shifted - MAGIC;
        let f = x - n * LN2_HI - n * LN2_LO; // |f| <= ln2 / 2
        // e^f, Taylor to the 7th power (error < 1e-8 on |f| <= 0.35)
        let p = 1.0
            + f * (1.0
                + f * (0.5
                    + f * (1.0 / 6.0
                        + f * (1.0 / 24.0 + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f / 5040.0))))));
        // 2^n: n sits in the low mantissa bits of `shifted` (two's complement around 0x4B40_0000).
        let n_bits = shifted.to_bits().wrapping_sub(0x4B40_0000);
        let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
        p * scale
    }

    /// Sums in 8 lanes (a vector register's worth), so the loop vectorises.
    #[inline(always)]
    fn lanes_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
        let mut acc = [0f32; 8];
        let chunks = xs.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] += f(c[i]);
            }
        }
        acc.iter().sum::<f32>() + rest.iter().map(|&x| f(x)).sum::<f32>()
    }

    #[inline(always)]
    fn lanes_max(xs: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; 8];
        let chunks = xs.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
            }
        }
        acc.iter()
            .chain(rest)
            .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
    }

    /// The exact GELU, `x/2 (1 + erf(x/√2))`, with erf from Abramowitz and Stegun 7.1.26
    /// (absolute error under 1.5e-7).
    #[inline(always)]
    pub(super) fn gelu(xs: &mut [f32]) {
        const P: f32 = 0.327_591_1;
        const A: [f32; 5] = [
            0.254_829_6,
            -0.284_496_74,
            1.421_413_7,
            -1.453_152_1,
            1.061_405_4,
        ];
        for x in xs.iter_mut() {
            let z = *x * std::f32::consts::FRAC_1_SQRT_2;
            let a = z.abs();
            let t = 1.0 / (1.0 + P * a);
            let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
            let erf_abs = 1.0 - poly * exp_neg(-a * a);
            let erf = if z < 0.0 { -erf_abs } else { erf_abs };
            *x = 0.5 * *x * (1.0 + erf);
        }
    }

    #[inline(always)]
    pub(super) fn softmax(row: &mut [f32]) {
        let max = lanes_max(row);
        for x in row.iter_mut() {
            *x = exp_neg(*x - max);
        }
        let inv = 1.0 / lanes_sum(row, |x| x);
        for x in row.iter_mut() {
            *x *= inv;
        }
    }

    #[inline(always)]
    pub(super) fn layer_norm(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
        let n = row.len() as f32;
        let mean = lanes_sum(row, |x| x) / n;
        let var = lanes_sum(row, |x| (x - mean) * (x - mean)) / n;
        let inv = 1.0 / (var + eps).sqrt();
        for ((x, w), b) in row.iter_mut().zip(weight).zip(bias) {
            *x = (*x - mean) * inv * w + b;
        }
    }
}

mod generic {
    pub(super) fn layer_norm(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
        super::body::layer_norm(row, weight, bias, eps)
    }
    pub(super) fn gelu(xs: &mut [f32]) {
        super::body::gelu(xs)
    }
    pub(super) fn softmax(row: &mut [f32]) {
        super::body::softmax(row)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn layer_norm(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
        super::body::layer_norm(row, weight, bias, eps)
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gelu(xs: &mut [f32]) {
        super::body::gelu(xs)
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn softmax(row: &mut [f32]) {
        super::body::softmax(row)
    }
}

/// A row-major matrix view: `rows x cols` elements `stride` apart from row to row.
#[derive(Clone, Copy, Debug)]
pub(super) struct View {
    pub(super) ptr: *const f32,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) stride: usize,
}

/// A mutable row-major matrix view.
#[derive(Clone, Copy, Debug)]
pub(super) struct ViewMut {
    pub(super) ptr: *mut f32,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) stride: usize,
}

impl ViewMut {
    /// The `rows x cols` block starting at (`row`, `col`).
    ///
    /// # Safety
    /// The block must lie within this view.
    pub(super) unsafe fn block(&self, row: usize, col: usize, rows: usize, cols: usize) -> ViewMut {
        debug_assert!(row + rows <= self.rows && col + cols <= self.cols);
        ViewMut {
            // SAFETY: within the view, as the caller guarantees.
            ptr: unsafe { self.ptr.add(row * self.stride + col) },
            rows,
            cols,
            stride: self.stride,
        }
    }
}

// SAFETY: views are handed to worker threads only over disjoint parts of buffers that outlive
// the parallel section (see `Encoder::attention`).
unsafe impl Send for View {}
unsafe impl Sync for View {}
unsafe impl Send for ViewMut {}
unsafe impl Sync for ViewMut {}

/// How `b` is read in [`matmul`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// As stored.
    Plain,
    /// Transposed (`b` is `n x k`, read as `k x n`).
    Transposed,
}

/// `dst = scale * a · b` (or `dst += scale * a · b` with `accumulate`), `a` being `m x k` and
/// `b` `k x n` (or `n x k` read transposed).
///
/// # Safety
/// The views must point at live buffers of their extents, `dst` not overlapping `a` or `b`.
pub(super) unsafe fn matmul(
    dst: ViewMut,
    a: View,
    b: View,
    side: Side,
    scale: f32,
    accumulate: bool,
    parallelism: Parallelism,
) {
    let (m, k) = (a.rows, a.cols);
    let n = dst.cols;
    debug_assert_eq!(dst.rows, m);
    let (b_rs, b_cs) = match side {
        Side::Plain => {
            debug_assert_eq!((b.rows, b.cols), (k, n));
            (b.stride as isize, 1)
        }
        Side::Transposed => {
            debug_assert_eq!((b.rows, b.cols), (n, k));
            (1, b.stride as isize)
        }
    };
    // SAFETY: the caller guarantees the extents; gemm reads `a`, `b` and writes `dst` within
    // them.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.ptr,
            1,
            dst.stride as isize,
            accumulate,
            a.ptr,
            1,
            a.stride as isize,
            b.ptr,
            b_cs,
            b_rs,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf_gelu(x: f64) -> f64 {
        // erf by its series (|x| small) or continued fraction is overkill here: use the
        // identity with the complementary error function from the standard library's f64 exp
        // integrated numerically.
        let steps = 20_000;
        let z = x / std::f64::consts::SQRT_2;
        let h = z / steps as f64;
        let mut sum = 0.0;
        for i in 0..steps {
            let t = (i as f64 + 0.5) * h;
            sum += (-t * t).exp();
        }
        let erf = 2.0 / std::f64::consts::PI.sqrt() * sum * h;
        0.5 * x * (1.0 + erf)
    }

    #[test]
    fn row_kernels_agree_with_the_definitions() {
        for kernels in [
            row_kernels(),
            RowKernels {
                layer_norm: generic::layer_norm,
                gelu: generic::gelu,
                softmax: generic::softmax,
            },
        ] {
            let xs: Vec<f32> = (-60..=60).map(|i| i as f32 / 10.0).collect();
            let mut g = xs.clone();
            (kernels.gelu)(&mut g);
            for (x, y) in xs.iter().zip(&g) {
                let want = erf_gelu(*x as f64);
                assert!(
                    (*y as f64 - want).abs() < 2e-6,
                    "gelu({x}) = {y}, want {want}"
                );
            }
            let mut row = vec![1.0f32, 2.0, 3.0, -100.0, 0.5];
            (kernels.softmax)(&mut row);
            let e: Vec<f64> = [1.0f64, 2.0, 3.0, -100.0, 0.5]
                .iter()
                .map(|x| (x - 3.0).exp())
                .collect();
            let s: f64 = e.iter().sum();
            for (got, want) in row.iter().zip(e.iter().map(|x| x / s)) {
                assert!((*got as f64 - want).abs() < 1e-6, "{got} vs {want}");
            }
            let mut row = vec![1.0f32, 2.0, 3.0, 4.0];
            (kernels.layer_norm)(
                &mut row,
                &[1.0, 1.0, 2.0, 1.0],
                &[0.0, 0.0, 0.0, 1.0],
                1e-12,
            );
            let sd = 1.25f32.sqrt();
            let want = [-1.5 / sd, -0.5 / sd, 2.0 * 0.5 / sd, 1.5 / sd + 1.0];
            for (g, w) in row.iter().zip(want) {
                assert!((g - w).abs() < 1e-5, "{row:?}");
            }
        }
    }

    #[test]
    fn exp_is_accurate_over_its_range() {
        for i in 0..=8700 {
            let x = -(i as f32) / 100.0;
            let got = body::exp_neg(x) as f64;
            let want = (x as f64).exp();
            assert!(
                (got - want).abs() <= 3e-7 * want + 1e-38,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(body::exp_neg(-200.0), body::exp_neg(-87.0));
    }

    #[test]
    fn matmul_reads_plain_and_transposed_operands() {
        // a: 2x3, b: 3x2 (plain) and its transpose 2x3.
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0];
        let bt = [7.0f32, 9.0, 11.0, 8.0, 10.0, 12.0];
        let want = [58.0f32, 64.0, 139.0, 154.0];
        for (buf, side) in [(&b, Side::Plain), (&bt, Side::Transposed)] {
            let mut dst = [1.0f32; 4];
            let (rows, cols) = if side == Side::Plain { (3, 2) } else { (2, 3) };
            // dst = alpha * a @ b (+ dst when accumulating)
            let mut product = |alpha: f32, accumulate: bool| unsafe {
                matmul(
                    ViewMut {
                        ptr: dst.as_mut_ptr(),
                        rows: 2,
                        cols: 2,
                        stride: 2,
                    },
                    View {
                        ptr: a.as_ptr(),
                        rows: 2,
                        cols: 3,
                        stride: 3,
                    },
                    View {
                        ptr: buf.as_ptr(),
                        rows,
                        cols,
                        stride: cols,
                    },
                    side,
                    alpha,
                    accumulate,
                    Parallelism::None,
                );
                dst
            };
            assert_eq!(product(1.0, false), want);
            assert_eq!(product(0.5, true), want.map(|w| w * 1.5));
        }
    }
}
