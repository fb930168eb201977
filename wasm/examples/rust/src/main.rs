//! The strict acpflow policy (../README.md) in Rust, with no crates: a WASI
//! command reading the request on stdin and the kind in argv[1].
//!
//! Build: rustc --edition=2021 --target wasm32-wasi -C opt-level=s -C strip=symbols -o policy.wasm src/main.rs

use std::io::{self, Read, Write};
use std::process::exit;

mod json;

use json::Json;

fn main() {
    let mut input = Vec::new();
    if io::stdin().read_to_end(&mut input).is_err() {
        fail("cannot read stdin");
    }
    let kind = std::env::args().nth(1).unwrap_or_default();
    let request = match json::parse(&input) {
        Ok(v @ Json::Obj(_)) => v,
        Ok(_) => fail("malformed request: not a JSON object"),
        Err(e) => fail(&format!("malformed request: {}", e)),
    };
    let answer = match kind.as_str() {
        "permission" => permission(&request),
        "env" => env(&request),
        _ => Err(format!("unknown kind {:?}", kind)),
    };
    match answer {
        Ok(text) => {
            let mut out = io::stdout();
            if out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_err() {
                fail("cannot write stdout");
            }
        }
        Err(e) => fail(&format!("malformed request: {}", e)),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("policy: {}", msg);
    exit(1)
}

fn verdict(decision: &str, reason: &str) -> Result<String, String> {
    Ok(format!("{{\"decision\":\"{}\",\"reason\":\"{}\"}}\n", decision, reason))
}

/// A member that must be a string if present; null counts as missing.
fn string<'a>(obj: Option<&'a Json>, key: &str) -> Result<&'a str, String> {
    match obj.and_then(|o| o.get(key)) {
        None => Ok(""),
        Some(Json::Str(s)) => Ok(s),
        Some(_) => Err(format!("{} is not a string", key)),
    }
}

fn permission(req: &Json) -> Result<String, String> {
    let tool = match req.get("tool") {
        None => None,
        Some(t @ Json::Obj(_)) => Some(t),
        Some(_) => return Err("tool is not an object".into()),
    };
    let kind = string(tool, "kind")?;
    let command = string(tool, "command")?;
    let locations: &[Json] = match tool.and_then(|t| t.get("locations")) {
        None => &[],
        Some(Json::Arr(items)) => items,
        Some(_) => return Err("tool.locations is not an array".into()),
    };
    let mut inside = !locations.is_empty();
    for location in locations {
        match location {
            // as Go decodes it: a location with no in_workspace
            Json::Null => inside = false,
            Json::Obj(_) => match location.get("in_workspace") {
                None | Some(Json::Bool(false)) => inside = false,
                Some(Json::Bool(true)) => {}
                Some(_) => return Err("in_workspace is not a boolean".into()),
            },
            _ => return Err("a location is not an object".into()),
        }
    }
    match kind {
        "read" | "search" | "think" => verdict("allow", "read-only tool"),
        "edit" if inside => verdict("allow", "edit inside the workspace"),
        _ if commands(command).any(|c| matches!(first_word(c), "rm" | "sudo" | "curl")) => {
            verdict("reject", "destructive or networked command")
        }
        _ => verdict("reject", "not allowed by the strict policy"),
    }
}

/// commands cuts a command line at &&, ||, ; and |, left to right.
fn commands(line: &str) -> impl Iterator<Item = &str> {
    let bytes = line.as_bytes();
    let mut parts = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let two = bytes.len() - i >= 2 && (&bytes[i..i + 2] == b"&&" || &bytes[i..i + 2] == b"||");
        let cut = if two {
            2
        } else if bytes[i] == b';' || bytes[i] == b'|' {
            1
        } else {
            0
        };
        if cut > 0 {
            parts.push(&line[start..i]);
            start = i + cut;
            i += cut;
        } else {
            i += 1;
        }
    }
    parts.push(&line[start..]);
    parts.into_iter()
}

fn first_word(cmd: &str) -> &str {
    let is_space = |c: char| c == ' ' || c == '\t' || c == '\n' || c == '\r';
    cmd.split(is_space).find(|w| !w.is_empty()).unwrap_or("")
}

fn env(req: &Json) -> Result<String, String> {
    let proposed: &[(String, Json)] = match req.get("proposed") {
        None => &[],
        Some(Json::Obj(members)) => members,
        Some(_) => return Err("proposed is not an object".into()),
    };
    if proposed.iter().any(|(_, v)| !matches!(v, Json::Str(_))) {
        return Err("a proposed value is not a string".into());
    }
    if !proposed.iter().any(|(k, _)| k == "HOME") {
        return Ok("{\"deny\":\"no HOME\"}\n".into());
    }
    let mut out = String::from("{\"env\":{");
    let mut first = true;
    for (name, value) in proposed {
        if name.starts_with("AWS_") {
            continue;
        }
        if let Json::Str(value) = value {
            if !first {
                out.push(',');
            }
            first = false;
            json::quote(&mut out, name);
            out.push(':');
            json::quote(&mut out, value);
        }
    }
    out.push_str("}}\n");
    Ok(out)
}
