//! An example crate of custom tools for memgpt-rs, defined with nothing but `#[memgpt_fn]`.
//!
//! Depend on it and name it once in your binary so the linker keeps it:
//!
//! ```ignore
//! use memgpt_example_tools as _;
//! ```
//!
//! then offer the tools to an agent by name: `.function("calculate").function("current_time")`.

use memgpt::function::{FunctionContext, FunctionError};
use memgpt::memgpt_fn;

/// Evaluates an arithmetic expression exactly as written, e.g. "2 * (3 + 4) / 5". Supports
/// + - * / ^, parentheses and decimals.
#[memgpt_fn]
async fn calculate(
    /// The expression to evaluate.
    expression: String,
) -> Result<String, FunctionError> {
    let value = expression::evaluate(&expression).map_err(FunctionError::new)?;
    Ok(expression::format_number(value))
}

/// Tells the current date and time, optionally in another UTC offset.
#[memgpt_fn]
async fn current_time(
    ctx: &FunctionContext<'_>,
    /// Hours to add to UTC, e.g. -5 for New York in winter (default 0).
    utc_offset_hours: Option<i32>,
) -> Result<String, FunctionError> {
    let offset = utc_offset_hours.unwrap_or(0);
    if !(-12..=14).contains(&offset) {
        return Err(FunctionError::new(format!(
            "utc_offset_hours must be between -12 and 14, got {offset}"
        )));
    }
    let local = ctx.now() + memgpt::chrono::Duration::hours(i64::from(offset));
    Ok(format!(
        "{} (UTC{offset:+})",
        local.format("%A %Y-%m-%d %H:%M")
    ))
}

/// A small recursive-descent evaluator (no dependencies, no `eval`).
pub mod expression {
    /// Evaluates `input`; the error says what is wrong and where.
    pub fn evaluate(input: &str) -> Result<f64, String> {
        let mut parser = Parser {
            chars: input.chars().filter(|c| !c.is_whitespace()).collect(),
            pos: 0,
        };
        if parser.chars.is_empty() {
            return Err("the expression is empty".into());
        }
        let value = parser.sum()?;
        if parser.pos < parser.chars.len() {
            return Err(format!(
                "unexpected `{}` at position {}",
                parser.chars[parser.pos],
                parser.pos + 1
            ));
        }
        if !value.is_finite() {
            return Err("the result is not a finite number (division by zero?)".into());
        }
        Ok(value)
    }

    /// Formats a result without a trailing `.0` for whole numbers.
    pub fn format_number(value: f64) -> String {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            format!("{}", value as i64)
        } else {
            format!("{value}")
        }
    }

    struct Parser {
        chars: Vec<char>,
        pos: usize,
    }

    impl Parser {
        fn peek(&self) -> Option<char> {
            self.chars.get(self.pos).copied()
        }

        fn sum(&mut self) -> Result<f64, String> {
            let mut value = self.product()?;
            while let Some(op @ ('+' | '-')) = self.peek() {
                self.pos += 1;
                let rhs = self.product()?;
                value = if op == '+' { value + rhs } else { value - rhs };
            }
            Ok(value)
        }

        fn product(&mut self) -> Result<f64, String> {
            let mut value = self.unary()?;
            while let Some(op @ ('*' | '/')) = self.peek() {
                self.pos += 1;
                let rhs = self.unary()?;
                value = if op == '*' { value * rhs } else { value / rhs };
            }
            Ok(value)
        }

        /// Unary minus binds looser than `^`: -2^2 = -(2^2).
        fn unary(&mut self) -> Result<f64, String> {
            if self.peek() == Some('-') {
                self.pos += 1;
                return Ok(-self.unary()?);
            }
            self.power()
        }

        /// `^` is right-associative: 2^3^2 = 2^(3^2).
        fn power(&mut self) -> Result<f64, String> {
            let base = self.atom()?;
            if self.peek() == Some('^') {
                self.pos += 1;
                let exponent = self.unary()?;
                return Ok(base.powf(exponent));
            }
            Ok(base)
        }

        fn atom(&mut self) -> Result<f64, String> {
            match self.peek() {
                Some('(') => {
                    self.pos += 1;
                    let value = self.sum()?;
                    if self.peek() != Some(')') {
                        return Err(format!("missing `)` at position {}", self.pos + 1));
                    }
                    self.pos += 1;
                    Ok(value)
                }
                Some(c) if c.is_ascii_digit() || c == '.' => {
                    let start = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                        self.pos += 1;
                    }
                    let text: String = self.chars[start..self.pos].iter().collect();
                    text.parse()
                        .map_err(|_| format!("`{text}` is not a number"))
                }
                Some(c) => Err(format!("unexpected `{c}` at position {}", self.pos + 1)),
                None => Err("the expression ends too early".into()),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn arithmetic() {
            assert_eq!(evaluate("2 * (3 + 4)").unwrap(), 14.0);
            assert_eq!(evaluate("-2^2").unwrap(), -4.0);
            assert_eq!(evaluate("2^3^2").unwrap(), 512.0);
            assert_eq!(evaluate("7/2").unwrap(), 3.5);
            assert_eq!(evaluate("2^-1").unwrap(), 0.5);
            assert_eq!(format_number(14.0), "14");
            assert!(evaluate("1/0").unwrap_err().contains("division by zero"));
            assert_eq!(
                evaluate("2 +").unwrap_err(),
                "the expression ends too early"
            );
            assert_eq!(
                evaluate("2 $ 3").unwrap_err(),
                "unexpected `$` at position 2"
            );
            assert!(evaluate("(1").unwrap_err().contains("missing `)`"));
        }
    }
}
