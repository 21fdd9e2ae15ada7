//! The spans of a step in OpenTelemetry's GenAI semantic conventions, as `tracing` spans.
//!
//! A step is an `invoke_agent {name}` span; each model call in it a `chat {model}` span and
//! each function call an `execute_tool {function}` span, both its children. Their fields are
//! the conventions' attribute names (`gen_ai.operation.name`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`, `gen_ai.usage.cache_read.input_tokens`,
//! `gen_ai.response.finish_reasons`, `gen_ai.tool.name`, ...; `otel.name` is the span's name
//! there), plus `memgpt.*` attributes of what the step did to memory: the functions it called,
//! memory pressure (the fraction of the context window in use), whether it was warned, and its
//! flushes.
//!
//! Nothing here depends on OpenTelemetry: any `tracing` subscriber sees these spans, and
//! `tracing-opentelemetry` turns them into OpenTelemetry spans with those attributes (the
//! `memgpt` crate's `otel` feature exports them over OTLP).

use tracing::field::Empty;
use tracing::{Span, info_span};

use super::{StepRecord, StopReason};
use crate::function::FunctionReturn;
use crate::llm::{ChatResponse, FinishReason, LlmError, Usage};

/// The span of one agent step (`invoke_agent {name}`).
pub(crate) fn step_span(agent_id: &str, agent_name: &str, event: &str) -> Span {
    info_span!(
        "step",
        otel.name = format!("invoke_agent {agent_name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        agent = agent_id,
        event = event,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = agent_id,
        gen_ai.agent.name = agent_name,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        memgpt.step.functions = Empty,
        memgpt.step.llm_calls = Empty,
        memgpt.step.stop_reason = Empty,
        memgpt.memory.pressure = Empty,
        memgpt.memory.pressure_warned = Empty,
        memgpt.memory.flushes = Empty,
        memgpt.memory.flushed_messages = Empty,
        memgpt.context.tokens = Empty,
        memgpt.context.queued_messages = Empty,
        error.type = Empty,
    )
}

/// Records what the step did on its span.
pub(crate) fn record_step(span: &Span, result: &crate::Result<StepRecord>) {
    let record = match result {
        Ok(record) => record,
        Err(e) => {
            span.record("error.type", error_type(e));
            span.record("otel.status_code", "ERROR");
            return;
        }
    };
    let functions: Vec<&str> = record
        .function_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    record_usage(span, &record.usage);
    span.record("memgpt.step.functions", functions.join(","));
    span.record("memgpt.step.llm_calls", record.llm_calls as u64);
    span.record("memgpt.step.stop_reason", stop_reason(&record.stop_reason));
    span.record("memgpt.memory.pressure", record.context.fraction);
    span.record("memgpt.memory.pressure_warned", record.pressure_warning);
    span.record("memgpt.memory.flushes", record.flushes.len() as u64);
    span.record(
        "memgpt.memory.flushed_messages",
        record
            .flushes
            .iter()
            .map(|f| f.evicted_messages as u64)
            .sum::<u64>(),
    );
    span.record("memgpt.context.tokens", record.context.total_tokens as u64);
    span.record(
        "memgpt.context.queued_messages",
        record.context.queue_messages as u64,
    );
    if let StopReason::ProviderError { .. } = record.stop_reason {
        span.record("error.type", "provider_error");
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of one model call (`chat {model}`).
pub(crate) fn chat_span(provider: &str, model: &str) -> Span {
    info_span!(
        "chat",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        error.type = Empty,
    )
}

/// Records a model call's answer (or failure) on its span.
pub(crate) fn record_chat(span: &Span, result: Result<&ChatResponse, &LlmError>) {
    match result {
        Ok(response) => {
            if !response.model.is_empty() {
                span.record("gen_ai.response.model", response.model.as_str());
            }
            span.record(
                "gen_ai.response.finish_reasons",
                finish_reason(&response.finish_reason),
            );
            record_usage(span, &response.usage);
        }
        Err(e) => {
            span.record("error.type", llm_error_type(e));
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// Records token usage in the conventions' attributes (the span declares them).
fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        usage.cached_prompt_tokens,
    );
}

/// The span of one function call (`execute_tool {function}`).
pub(crate) fn tool_span(function: &str, call_id: &str) -> Span {
    info_span!(
        "function",
        otel.name = format!("execute_tool {function}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = function,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        error.type = Empty,
    )
}

/// Records a function call's outcome on its span: an error result is an error of the span
/// (the model reads it and may correct itself).
pub(crate) fn record_tool(span: &Span, result: &FunctionReturn) {
    if result.result.is_err() {
        span.record("error.type", "function_error");
        span.record("otel.status_code", "ERROR");
    }
}

/// The conventions' value of a finish reason.
fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

/// A low-cardinality name of a model call's failure (`error.type`).
fn llm_error_type(e: &LlmError) -> &'static str {
    if e.is_context_overflow() {
        "context_overflow"
    } else if e.is_transient() {
        "transient"
    } else {
        "provider_error"
    }
}

/// A low-cardinality name of a step's failure (`error.type`).
fn error_type(e: &crate::Error) -> &'static str {
    match e {
        crate::Error::Store(_) => "store",
        crate::Error::Memory(_) => "memory",
        crate::Error::Embed(_) => "embedding",
        crate::Error::Config(_) => "config",
        _ => "other",
    }
}

/// The name of why a step stopped (as it serializes).
fn stop_reason(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::NoFunctionCall => "no_function_call",
        StopReason::ChainLimit { .. } => "chain_limit",
        StopReason::TimersPaused => "timers_paused",
        StopReason::AwaitingApproval { .. } => "awaiting_approval",
        StopReason::ProviderError { .. } => "provider_error",
    }
}
