/* The tensorjit command: compiles one index-notation expression from the
 * command line (cli_args.c parses, cli_run.c runs), or, with no expression
 * or with -repl, starts the interactive session (repl.c).
 *
 * Every failure is one "tensorjit: <message>" line on stderr and exit
 * status 1; --help and --version print to stdout and exit 0.
 */
#include "tool.h"

int main(int argc, char **argv) {
  CliArgs a;
  if (!cli_parse(argc, argv, &a)) {
    fprintf(stderr, "tensorjit: %s\n", tool_msg());
    return 1;
  }
  if (a.help) {
    cli_usage(stdout);
    return 0;
  }
  if (a.version) {
    printf("tensorjit %s\n", tj_version());
    return 0;
  }
  if (a.repl && a.expr) {
    fprintf(stderr, "tensorjit: -repl takes no expression (type it at the prompt)\n");
    return 1;
  }
  int rc = a.expr ? cli_run(&a) : repl_run(&a);
  tj_shutdown();
  return rc;
}
