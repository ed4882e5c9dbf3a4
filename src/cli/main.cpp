// crossover: train, compare and explain on CPU and GPU. Exit codes: 0 success; 2 bad usage, bad
// input or an unavailable device (one line on stderr); 1 internal error.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

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

// The edit distance between a and b, a swap of two neighbours counting one edit ("trian" is one
// from "train"): optimal string alignment.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

bool has_subcommand(CLI::App& app, const std::string& name) {
  const std::vector<CLI::App*> subs = app.get_subcommands([](CLI::App*) { return true; });
  return std::any_of(subs.begin(), subs.end(),
                     [&](const CLI::App* s) { return s->get_name() == name; });
}

// For a first argument that is not an option and names no subcommand: the line that says so,
// with the nearest subcommand when one is close (at most two edits), else the list of them.
std::string unknown_subcommand(CLI::App& app, const std::string& word) {
  std::string nearest, all;
  std::size_t best = 3;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    all += (all.empty() ? "" : ", ") + name;
    if (const std::size_t d = edit_distance(word, name); d < best) best = d, nearest = name;
  }
  return "unknown subcommand '" + word + "'; " +
         (nearest.empty() ? "the subcommands are " + all : "did you mean '" + nearest + "'?");
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
  crossover::cli::add_report(app);
  crossover::cli::remember_command_line(argc, argv);
  if (argc > 1 && argv[1][0] != '-' && !has_subcommand(app, argv[1])) {
    std::fprintf(stderr, "crossover: error: %s (see crossover --help)\n",
                 unknown_subcommand(app, argv[1]).c_str());
    return 2;
  }
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
