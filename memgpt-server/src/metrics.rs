//! Prometheus metrics of one process, served at `/metrics` in the text exposition format:
//! steps and their latency, LLM time and tokens, flushes, and error responses by code.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memgpt_core::agent::Event;
use memgpt_core::{Agent, StepRecord, StopReason};

use crate::error::ErrorCode;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A latency histogram with Prometheus's cumulative buckets.
#[derive(Debug, Default)]
struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// Sum in microseconds.
    sum_micros: AtomicU64,
}

impl Histogram {
    fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            if seconds <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// The process's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    steps_ok: AtomicU64,
    steps_provider_error: AtomicU64,
    steps_failed: AtomicU64,
    step_seconds: Histogram,
    llm_seconds: Histogram,
    prompt_tokens: AtomicU64,
    cached_prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    llm_calls: AtomicU64,
    flushes: AtomicU64,
    errors: Mutex<Vec<(ErrorCode, u64)>>,
}

impl Metrics {
    /// Steps `agent` with `event`, recording the step.
    pub async fn step(&self, agent: &mut Agent, event: Event) -> memgpt_core::Result<StepRecord> {
        let started = std::time::Instant::now();
        let result = agent.step(event).await;
        self.record(result.as_ref().ok(), started.elapsed());
        result
    }

    /// Records a step that took `elapsed` (`None`: it failed and left nothing stored).
    pub(crate) fn record(&self, step: Option<&StepRecord>, elapsed: Duration) {
        self.step_seconds.observe(elapsed);
        let Some(record) = step else {
            self.steps_failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let outcome = match record.stop_reason {
            StopReason::ProviderError { .. } => &self.steps_provider_error,
            _ => &self.steps_ok,
        };
        outcome.fetch_add(1, Ordering::Relaxed);
        if record.llm_calls > 0 {
            self.llm_seconds.observe(record.timings.llm);
        }
        self.llm_calls
            .fetch_add(record.llm_calls as u64, Ordering::Relaxed);
        self.prompt_tokens
            .fetch_add(record.usage.prompt_tokens, Ordering::Relaxed);
        self.cached_prompt_tokens
            .fetch_add(record.usage.cached_prompt_tokens, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(record.usage.completion_tokens, Ordering::Relaxed);
        self.flushes
            .fetch_add(record.flushes.len() as u64, Ordering::Relaxed);
    }

    /// Counts an error response.
    pub fn error(&self, code: ErrorCode) {
        let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        match errors.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += 1,
            None => errors.push((code, 1)),
        }
    }

    /// The metrics in Prometheus's text format; `loaded_agents` is the hub's gauge.
    pub fn render(&self, loaded_agents: usize) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, rows: &[(&str, u64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (labels, value) in rows {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            &mut out,
            "memgpt_steps_total",
            "Agent steps, by outcome.",
            &[
                ("{outcome=\"ok\"}", load(&self.steps_ok)),
                (
                    "{outcome=\"provider_error\"}",
                    load(&self.steps_provider_error),
                ),
                ("{outcome=\"failed\"}", load(&self.steps_failed)),
            ],
        );
        self.step_seconds
            .render(&mut out, "memgpt_step_seconds", "Step latency.");
        self.llm_seconds.render(
            &mut out,
            "memgpt_step_llm_seconds",
            "Time a step spent in LLM calls.",
        );
        counter(
            &mut out,
            "memgpt_llm_calls_total",
            "LLM calls made by steps.",
            &[("", load(&self.llm_calls))],
        );
        counter(
            &mut out,
            "memgpt_llm_tokens_total",
            "LLM tokens, by kind.",
            &[
                ("{kind=\"prompt\"}", load(&self.prompt_tokens)),
                ("{kind=\"cached_prompt\"}", load(&self.cached_prompt_tokens)),
                ("{kind=\"completion\"}", load(&self.completion_tokens)),
            ],
        );
        counter(
            &mut out,
            "memgpt_flushes_total",
            "Queue flushes (messages evicted and summarised).",
            &[("", load(&self.flushes))],
        );
        let errors: Vec<(String, u64)> = self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(code, n)| {
                let code = serde_json::to_value(code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                (format!("{{code=\"{code}\"}}"), *n)
            })
            .collect();
        let rows: Vec<(&str, u64)> = errors.iter().map(|(l, n)| (l.as_str(), *n)).collect();
        counter(
            &mut out,
            "memgpt_http_errors_total",
            "Error responses, by code.",
            &rows,
        );
        let _ = writeln!(
            out,
            "# HELP memgpt_loaded_agents Agents loaded in this process.\n\
             # TYPE memgpt_loaded_agents gauge\nmemgpt_loaded_agents {loaded_agents}"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_errors_counted_by_code() {
        let metrics = Metrics::default();
        metrics.step_seconds.observe(Duration::from_millis(3));
        metrics.step_seconds.observe(Duration::from_millis(30));
        metrics.record(None, Duration::from_millis(1));
        metrics.error(ErrorCode::NotFound);
        metrics.error(ErrorCode::NotFound);
        metrics.error(ErrorCode::BadJson);
        let text = metrics.render(7);
        assert!(
            text.contains("memgpt_step_seconds_bucket{le=\"0.005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("memgpt_step_seconds_bucket{le=\"0.05\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("memgpt_step_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("memgpt_steps_total{outcome=\"failed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("memgpt_http_errors_total{code=\"not_found\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("memgpt_http_errors_total{code=\"bad_json\"} 1"),
            "{text}"
        );
        assert!(text.contains("memgpt_loaded_agents 7"), "{text}");
    }
}
