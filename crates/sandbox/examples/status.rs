//! Prints what this machine can enforce, then runs a command given on the command line.
use toolgate_sandbox::{CommandSpec, Sandbox, SandboxPolicy, status};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("{}", status());
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let sandbox = match Sandbox::new(SandboxPolicy::workspace_write(&cwd)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let spec = CommandSpec::shell(args.join(" "), &cwd);
    match sandbox.run(spec, Default::default()).await {
        Ok(r) => {
            print!("{}", r.output.text());
            println!("--\n{} in {:?}\n{}", r.exit, r.duration, r.enforcement);
            for d in r.denials {
                println!("{d}");
            }
        }
        Err(e) => eprintln!("error: {e}"),
    }
}
