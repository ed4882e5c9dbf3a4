// crossover: train, compare and explain on CPU and GPU. Exit codes: 0 success; 2 bad usage, bad
// input or an unavailable device (one line on stderr); 1 internal error.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/cli.h"
#include "core/error.h"
#include "ranks/mpi.h"

namespace {

// One line on stderr; one rank of several (mpirun) names itself and ends every rank, so that none
// waits forever in a collective for this one.
int fail(int code, const char* kind, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "crossover: %s: %s%s\n", kind, crossover::dist::rank_prefix().c_str(),
               what.c_str());
  std::fflush(stderr);
  crossover::dist::abort_all_if_parallel(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"crossover: the same training on CPU and GPU, and why one is faster", "crossover"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");
  crossover::cli::add_train(app);
  crossover::cli::add_evaluate(app);
  crossover::cli::add_predict(app);
  crossover::cli::add_devices(app);
  crossover::cli::add_calibrate(app);
  crossover::cli::add_explain(app);
  crossover::cli::add_compare(app);
  crossover::cli::add_sweep(app);
  crossover::cli::remember_command_line(argc, argv);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const crossover::cli::ExitStatus& e) {
    return e.code;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::puts("crossover 0.1.0");
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "crossover: error: %s (see crossover --help)\n", e.what());
    return 2;
  } catch (const crossover::Error& e) {
    return fail(2, "error", e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "internal error", "out of memory");
  } catch (const std::exception& e) {
    return fail(1, "internal error", e.what());
  }
}
