//! `#[memgpt_test_harness::test]`: registers a test function with the harness (see
//! `memgpt-test-harness`). The function stays as written; a static beside it names it, says how
//! to run it (sync, or async on a current-thread or multi-thread tokio runtime), and adds it to
//! the harness's list.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ItemFn, Lit, Meta, ReturnType, Token, parse_macro_input};

/// Registers a test: `#[test]` on a sync or async function; for an async one,
/// `#[test(flavor = "multi_thread", worker_threads = 2)]` runs it on a multi-thread runtime
/// (as `tokio::test` does; current-thread by default).
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = parse_macro_input!(item as ItemFn);
    let parsed = Punctuated::<Meta, Token![,]>::parse_terminated.parse(args);
    let args = match parsed {
        Ok(args) => args,
        Err(e) => return e.into_compile_error().into(),
    };
    let mut multi_thread = false;
    let mut workers: usize = 2;
    for arg in &args {
        let Meta::NameValue(pair) = arg else {
            return syn::Error::new_spanned(
                arg,
                "expected `flavor = \"...\"` or `worker_threads = N`",
            )
            .into_compile_error()
            .into();
        };
        let value = match &pair.value {
            Expr::Lit(ExprLit { lit, .. }) => lit,
            other => {
                return syn::Error::new_spanned(other, "expected a literal")
                    .into_compile_error()
                    .into();
            }
        };
        match (
            pair.path.get_ident().map(|i| i.to_string()).as_deref(),
            value,
        ) {
            (Some("flavor"), Lit::Str(s)) if s.value() == "multi_thread" => multi_thread = true,
            (Some("flavor"), Lit::Str(s)) if s.value() == "current_thread" => multi_thread = false,
            (Some("worker_threads"), Lit::Int(n)) => match n.base10_parse() {
                Ok(n) => workers = n,
                Err(e) => return e.into_compile_error().into(),
            },
            _ => {
                return syn::Error::new_spanned(pair, "unknown test argument")
                    .into_compile_error()
                    .into();
            }
        }
    }
    let name = &function.sig.ident;
    let returns = !matches!(function.sig.output, ReturnType::Default);
    let outcome = if returns {
        quote!(::memgpt_test_harness::__private::outcome(result))
    } else {
        quote!({
            let () = result;
            ::core::result::Result::Ok(())
        })
    };
    let run = if function.sig.asyncness.is_some() {
        let runtime = if multi_thread {
            quote!(::memgpt_test_harness::Runtime::MultiThread(#workers))
        } else {
            quote!(::memgpt_test_harness::Runtime::CurrentThread)
        };
        quote! {
            ::memgpt_test_harness::Run::Async(#runtime, || {
                ::std::boxed::Box::pin(async {
                    let result = #name().await;
                    #outcome
                })
            })
        }
    } else {
        quote! {
            ::memgpt_test_harness::Run::Sync(|| {
                let result = #name();
                #outcome
            })
        }
    };
    quote! {
        #function

        const _: () = {
            #[::memgpt_test_harness::__private::linkme::distributed_slice(::memgpt_test_harness::CASES)]
            #[linkme(crate = ::memgpt_test_harness::__private::linkme)]
            static CASE: ::memgpt_test_harness::Case = ::memgpt_test_harness::Case {
                module: ::core::module_path!(),
                name: ::core::stringify!(#name),
                run: #run,
            };
        };
    }
    .into()
}
