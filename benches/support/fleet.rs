//! `serve --fleet`: many agents on the servers (see the bench's documentation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Options, ms, percentile, tenant_key};

/// The resident memory of the processes, in KiB (`VmRSS`).
fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                })
                .unwrap_or(0)
        })
        .sum()
}

/// The agents each server holds loaded (`memgpt_loaded_agents` on `/metrics`).
async fn loaded(http: &reqwest::Client, bases: &[String]) -> Vec<u64> {
    let mut counts = Vec::new();
    for base in bases {
        let text = http
            .get(format!("{base}/metrics"))
            .bearer_auth(super::ADMIN)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        counts.push(
            text.lines()
                .find_map(|l| l.strip_prefix("memgpt_loaded_agents "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        );
    }
    counts
}

/// Sends `requests` (a path on a server, a JSON body) with `concurrency` in flight; the
/// latency of each that succeeded, and the response bodies in order (`Null` for failures).
async fn send(
    http: &reqwest::Client,
    key: &str,
    requests: Vec<(String, Value)>,
    concurrency: usize,
) -> (Vec<Duration>, Vec<Value>) {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut tasks = Vec::with_capacity(requests.len());
    for (url, body) in requests {
        let (http, key, semaphore) = (http.clone(), key.to_owned(), semaphore.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = semaphore.acquire_owned().await.expect("the semaphore");
            let sent = Instant::now();
            let response = http.post(url).bearer_auth(key).json(&body).send().await;
            match response {
                Ok(r) if r.status().is_success() => {
                    let body = r.json::<Value>().await.unwrap_or(Value::Null);
                    Some((sent.elapsed(), body))
                }
                Ok(r) => {
                    eprintln!("{}: {}", r.status(), r.text().await.unwrap_or_default());
                    None
                }
                Err(e) => {
                    eprintln!("{e}");
                    None
                }
            }
        }));
    }
    let (mut latencies, mut bodies) = (Vec::new(), Vec::new());
    for task in tasks {
        match task.await.expect("a client task") {
            Some((latency, body)) => {
                latencies.push(latency);
                bodies.push(body);
            }
            None => bodies.push(Value::Null),
        }
    }
    (latencies, bodies)
}

/// `p50 / p99` ms of `latencies`, and how many failed of `sent`.
fn summary(mut latencies: Vec<Duration>, sent: usize) -> String {
    if latencies.is_empty() {
        return format!("- (0 of {sent})");
    }
    let failed = sent - latencies.len();
    let (p50, p99) = (
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
    );
    let failed = if failed > 0 {
        format!(", {failed} failed")
    } else {
        String::new()
    };
    format!("{} / {}{failed}", ms(p50), ms(p99))
}

/// The fleet measurement: one table row, with the phases' timings on stderr.
pub async fn run(o: &Options, bases: &[String], pids: &[u32]) {
    let http = memgpt::http::client(&Default::default()).expect("an HTTP client");
    let key = tenant_key(&http, &bases[0]).await;
    let n = o.agents;
    let server_of = |i: usize| &bases[i % bases.len()];
    let before = rss_kib(pids);

    let started = Instant::now();
    let creates = (0..n)
        .map(|i| {
            (
                format!("{}/v1/agents", server_of(i)),
                json!({"name": format!("agent {i}")}),
            )
        })
        .collect();
    let (create_latencies, bodies) = send(&http, &key, creates, o.concurrency).await;
    let agents: Vec<Option<String>> = bodies
        .iter()
        .map(|b| b["id"].as_str().map(str::to_owned))
        .collect();
    eprintln!(
        "created {n} agents in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let after_create = rss_kib(pids);

    let step = |i: usize, text: &str| {
        agents[i].as_ref().map(|id| {
            (
                format!("{}/v1/agents/{id}/messages", server_of(i)),
                json!({ "text": text }),
            )
        })
    };
    let started = Instant::now();
    let firsts: Vec<_> = (0..n).filter_map(|i| step(i, "hello")).collect();
    let sent_first = firsts.len();
    let (first_latencies, _) = send(&http, &key, firsts, o.concurrency).await;
    eprintln!("one step each in {:.1} s", started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_kib(pids);
    let loaded_idle = loaded(&http, bases).await;

    // Steps across the fleet, in a scattered order (a stride prime to the fleet's size).
    let stride = (n / 2 + 1..).find(|s| gcd(*s, n.max(1)) == 1).unwrap_or(1);
    let later: Vec<_> = (0..o.messages)
        .filter_map(|m| step((m * stride) % n.max(1), "again"))
        .collect();
    let sent_later = later.len();
    let started = Instant::now();
    let (later_latencies, _) = send(&http, &key, later, o.concurrency).await;
    let rate = later_latencies.len() as f64 / started.elapsed().as_secs_f64();
    let after = rss_kib(pids);
    let loaded_after = loaded(&http, bases).await;

    let per_agent = (idle.saturating_sub(before)) as f64 * 1024.0 / n.max(1) as f64;
    let live = o
        .live
        .map_or("10,000 (default)".to_owned(), |l| l.to_string());
    println!(
        "| store | servers | agents | live_agents | create p50 / p99 ms | first step p50 / p99 ms | \
         later steps | later step p50 / p99 ms | steps/s | loaded (idle; after) | RSS MiB before / idle / after | RSS per idle agent |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {n} | {live} | {} | {} | {sent_later} | {} | {rate:.0} | {:?}; {:?} | {:.0} / {:.0} / {:.0} | {:.1} KB |",
        o.label,
        bases.len(),
        summary(create_latencies, n),
        summary(first_latencies, sent_first),
        summary(later_latencies, sent_later),
        loaded_idle,
        loaded_after,
        before as f64 / 1024.0,
        idle as f64 / 1024.0,
        after as f64 / 1024.0,
        per_agent / 1000.0,
    );
    eprintln!(
        "RSS after creating (KiB): {after_create}; the agents were created {} at a time",
        o.concurrency
    );
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}
