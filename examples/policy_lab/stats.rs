//! Means over seeds with 95% confidence intervals (Student's t), and the rule the lab uses to
//! call one policy better than another.

use serde::Serialize;

/// A mean with its two-sided 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The sample mean.
    pub mean: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
    /// How many samples (seeds).
    pub n: usize,
}

impl Interval {
    /// The mean of `samples` and its t interval (a single sample has a zero-width interval,
    /// which the report labels by showing `n`).
    pub fn of(samples: &[f64]) -> Self {
        let n = samples.len();
        if n == 0 {
            return Self {
                mean: f64::NAN,
                lo: f64::NAN,
                hi: f64::NAN,
                n,
            };
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return Self {
                mean,
                lo: mean,
                hi: mean,
                n,
            };
        }
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t975(n - 1) * (variance / n as f64).sqrt();
        Self {
            mean,
            lo: mean - half,
            hi: mean + half,
            n,
        }
    }

    /// Whether the interval lies wholly above zero (for a difference: "better"), wholly below
    /// ("worse"), or contains it ("not separated").
    pub fn verdict(&self) -> &'static str {
        if self.n < 2 {
            "one seed: not tested"
        } else if self.lo > 0.0 {
            "better"
        } else if self.hi < 0.0 {
            "worse"
        } else {
            "not separated"
        }
    }

    /// `0.274 [0.262, 0.286]`.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            self.mean,
            self.lo,
            self.hi,
            d = decimals
        )
    }
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (rounded up beyond the
/// table, so the interval is never narrower than it should be).
fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        31..=60 => 2.042,
        61..=120 => 2.000,
        _ => 1.980,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_t_interval_over_ten_seeds() {
        // Mean 0.5, sample standard deviation 0.1 * sqrt(10/9)... checked against the formula.
        let samples = [0.4, 0.6, 0.4, 0.6, 0.4, 0.6, 0.4, 0.6, 0.4, 0.6];
        let i = Interval::of(&samples);
        assert!((i.mean - 0.5).abs() < 1e-12);
        let sd = (samples.iter().map(|x| (x - 0.5f64).powi(2)).sum::<f64>() / 9.0).sqrt();
        let half = 2.262 * sd / 10f64.sqrt();
        assert!((i.hi - i.mean - half).abs() < 1e-12);
        assert!((i.mean - i.lo - half).abs() < 1e-12);
        assert_eq!(i.verdict(), "better");
        assert_eq!(Interval::of(&[-0.1, 0.1, 0.0]).verdict(), "not separated");
        assert_eq!(Interval::of(&[-0.1, -0.2, -0.15]).verdict(), "worse");
        assert_eq!(Interval::of(&[0.3]).verdict(), "one seed: not tested");
    }
}
