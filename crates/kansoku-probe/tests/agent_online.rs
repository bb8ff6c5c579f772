//! The agent's hits analysed while the program runs (issue 44) give the report the same
//! hits give analysed after the run, on one run of a program with two threads, nesting,
//! sleeps (off-CPU time), calls left by longjmp and the agent's calibration.

#[path = "../../kansoku-cli/tests/agent_build/mod.rs"]
mod agent_build;

use kansoku_monitor::events::{analyse_on_cpu, calibrate, calibration_differences};
use kansoku_probe::events::{record_events, Calibrate, EventOptions, Mechanism};

const PROGRAM: &str = r#"#include <pthread.h>
#include <setjmp.h>
#include <unistd.h>
volatile long sink;
jmp_buf env;
__attribute__((noinline)) void work(long i) { sink += i; }
__attribute__((noinline)) void nap(void) { usleep(300); }
__attribute__((noinline)) void leave(long i) { sink += i; longjmp(env, 1); }
__attribute__((noinline)) void outer(long n) {
    for (long i = 0; i < n; i++) work(i);
    if (n % 7 == 0) nap();
    for (long i = 0; i < 50; i++) sink *= 3;
}
static void *run(void *arg) {
    long rounds = (long) arg;
    for (long r = 0; r < rounds; r++) outer(r % 50);
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, run, (void *) 4000);
    run((void *) 6000);
    pthread_join(t, 0);
    for (long i = 0; i < 1000; i++) if (setjmp(env) == 0) leave(i);
    return 0;
}
"#;

#[test]
fn the_report_analysed_while_the_program_runs_equals_the_hits_analysed_after() {
    let dir = std::env::temp_dir().join(format!("kansoku-agent-online-{}", std::env::var("USER").unwrap_or_default()));
    let program = kansoku_examples::build_source("online", PROGRAM, &dir, &["-O2", "-pthread"]).expect("build");
    std::env::set_var("KANSOKU_AGENT", agent_build::agent());
    let options = EventOptions {
        program,
        args: Vec::new(),
        probes: ["work", "outer", "nap", "leave"].map(String::from).to_vec(),
        mechanism: Mechanism::Agent,
        calibrate: Calibrate::FirstProbe,
        keep_hits: true,
    };
    let r = record_events(&options, &mut |_| {}).expect("agent run");
    let (calibration, online) = r.analysed.clone().expect("the agent's run is analysed while it runs");
    assert_eq!(r.lost, 0);
    // outer(r % 50) calls work r % 50 times: 24.5 a round on average
    let calls = |name: &str| online.routines.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("{name}")).calls;
    assert_eq!(calls("outer"), 10_000);
    assert_eq!(calls("work"), 4000 / 50 * 1225 + 6000 / 50 * 1225);
    let leave = online.routines.iter().find(|x| x.name == "leave").unwrap();
    assert_eq!((leave.calls, leave.unfinished), (0, 1000));
    let nap = online.routines.iter().find(|x| x.name == "nap").unwrap();
    assert!(nap.blocked_ns > 0.0, "{nap:?}");
    assert!(calibration.is_some(), "the agent's calibration");
    // the same hits, kept, analysed after the run
    let offline_calibration = r.plan.calibration.and_then(|(a, b)| calibrate(&calibration_differences(&r.hits, a, b)));
    assert_eq!(calibration.map(|c| c.overhead_ns), offline_calibration.map(|c| c.overhead_ns));
    let points: Vec<_> = r.plan.points.iter().map(|p| p.point.clone()).collect();
    let offline = analyse_on_cpu(&points, &r.plan.routines, &r.hits, offline_calibration.map(|c| c.overhead_ns), r.measured_ns, &r.off_cpu, r.clock_resolution_ns);
    assert_eq!(format!("{online:?}"), format!("{offline:?}"));
}
