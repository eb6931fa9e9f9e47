// parallax-gui: the viewer, plus two scripted modes (DESIGN.md "Command line"):
//   parallax-gui --screenshot out.png [--size WxH] [--view timeline|compare|plans|stats]
//                [--range START_NS:END_NS] [--select REGEX] FILES...   (or --compare PRED MEAS)
//   parallax-gui --benchmark FILE [--threads N]        (one JSON object on stdout)
//   parallax-gui --modes out.json [--screenshot out.png [--size WxH]]   (parallax compare-modes curves)
// A bad file exits 2 naming it in these modes; in the window it is an error dialog. Without a
// display the scripted modes render offscreen, and the window exits 2 saying so.
#include <QApplication>
#include <QCommandLineParser>
#include <QImage>
#include <QPainter>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gui/app/benchmark.h"
#include "gui/core/selection.h"
#include "gui/views/main_window.h"
#include "gui/views/modes_view.h"
#include "gui/views/timeline_view.h"

namespace {

int Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "parallax-gui: %s\n", message.c_str());
  return code;
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

//! Whether the command line asks for one of the modes that need no window: a screenshot, the
//! benchmark, the help or the version.
bool WindowlessMode(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    for (const char* flag : {"--screenshot", "--benchmark", "--help", "-h", "--help-all", "-?", "--version", "-v"}) {
      if (a == flag || a.rfind(std::string(flag) + "=", 0) == 0) return true;
    }
  }
  return false;
}

//! Without a display (Linux: neither DISPLAY nor WAYLAND_DISPLAY) and no platform chosen, Qt would
//! abort (exit 134) naming its xcb plugin. The windowless modes then render offscreen; the viewer
//! says what is missing and how to get a picture without one. Returns the exit status, or 0 to go on.
int CheckDisplay(int argc, char** argv) {
#if defined(__linux__)
  if (EnvSet("QT_QPA_PLATFORM") || EnvSet("DISPLAY") || EnvSet("WAYLAND_DISPLAY")) return 0;
  if (WindowlessMode(argc, argv)) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    return 0;
  }
  return Fail(
      "no display found (DISPLAY and WAYLAND_DISPLAY are unset), so no window can open. Run it in a "
      "desktop session (or over ssh -X), or render a picture without a display: parallax-gui "
      "--screenshot out.png [--view timeline|compare|plans|stats] FILES... (the platform "
      "QT_QPA_PLATFORM=offscreen is what it uses)");
#else
  (void)argc;
  (void)argv;
  return 0;
#endif
}

//! `--modes FILE`: the compare-modes curves in their own window, or rendered into `shot` when given.
int ShowModes(const std::string& file, const QString& shot, const QString& size) {
  auto c = parallax::gui::LoadModesComparison(file);
  if (!c) return Fail(c.error().message, parallax::ExitCodeFor(c.error()));
  static parallax::gui::ModesView view;
  view.SetComparison(std::move(*c));
  view.setWindowTitle(QString::fromStdString("parallax-gui: " + file));
  if (shot.isEmpty()) {
    view.resize(1500, 600);
    view.show();
    return QApplication::exec();
  }
  int width = 1500, height = 600;
  if (std::sscanf(size.toStdString().c_str(), "%dx%d", &width, &height) != 2 || width < 200 || height < 150 ||
      width > 8000 || height > 8000) {
    return Fail("--size: expected WxH between 200x150 and 8000x8000, got \"" + size.toStdString() + "\"");
  }
  QImage img(width, height, QImage::Format_RGB32);
  QPainter p(&img);
  view.Paint(p, img.size());
  p.end();
  if (!img.save(shot, nullptr, 0)) return Fail("cannot write " + shot.toStdString(), 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = CheckDisplay(argc, argv); rc != 0) return rc;
  QApplication app(argc, argv);
  QApplication::setOrganizationName("parallax");
  QApplication::setApplicationName("parallax-gui");
  QCommandLineParser cli;
  cli.setApplicationDescription(
      "parallax timeline viewer, predicted-vs-measured comparison and plan explorer");
  cli.addHelpOption();
  cli.addPositionalArgument("files", "Trace (.json, .json.gz, Kineto), plan or candidates files");
  QCommandLineOption compare("compare", "Compare two traces: --compare PREDICTED MEASURED");
  QCommandLineOption screenshot("screenshot", "Render offscreen into a PNG and exit", "out.png");
  QCommandLineOption size("size", "Screenshot size", "WxH", "1600x900");
  QCommandLineOption view("view", "Screenshot view: timeline, compare, plans, stats", "view");
  QCommandLineOption range("range", "Timeline range to show, ns since the trace start",
                           "START_NS:END_NS");
  QCommandLineOption select("select",
                            "Screenshot: select the earliest slice whose name matches REGEX "
                            "(its details and flow arrows show)",
                            "REGEX");
  QCommandLineOption benchmark("benchmark", "Load FILE, render frames, print one JSON object",
                               "FILE");
  QCommandLineOption threads("threads",
                             "Threads that read a large trace (0: one per core; 1: no extra)",
                             "N", "0");
  QCommandLineOption modes("modes", "Open the curves of parallax compare-modes (its JSON)", "FILE");
  cli.addOptions({compare, screenshot, size, view, range, select, benchmark, threads, modes});
  cli.process(app);
  const QStringList files = cli.positionalArguments();
  if (cli.isSet(modes)) {
    return ShowModes(cli.value(modes).toStdString(), cli.isSet(screenshot) ? cli.value(screenshot) : QString(),
                     cli.isSet(size) ? cli.value(size) : QString("1500x600"));
  }

  if (cli.isSet(benchmark)) {
    auto r = parallax::gui::RunBenchmark(cli.value(benchmark).toStdString(),
                                         cli.value(threads).toInt());
    if (!r) return Fail(r.error().message, parallax::ExitCodeFor(r.error()));
    std::printf("%s\n", r->c_str());
    return 0;
  }

  parallax::gui::MainWindow w;
  const bool scripted = cli.isSet(screenshot);
  w.SetDialogs(!scripted);
  if (cli.isSet(compare)) {
    if (files.size() != 2) return Fail("--compare needs two files: PREDICTED MEASURED");
    if (auto st = w.CompareNow(files[0].toStdString(), files[1].toStdString()); !st) {
      if (scripted) return Fail(st.error().message, parallax::ExitCodeFor(st.error()));
    } else {
      w.ShowTab(parallax::gui::MainWindow::kCompareTab);
    }
  } else {
    for (const QString& f : files) {
      if (scripted) {
        if (auto st = w.OpenNow(f.toStdString()); !st)
          return Fail(st.error().message, parallax::ExitCodeFor(st.error()));
      } else {
        w.OpenAsync(f);  // one at a time: the rest are opened through the menu
        break;
      }
    }
  }
  if (!scripted) {
    w.show();
    return QApplication::exec();
  }

  int width = 1600, height = 900;
  if (std::sscanf(cli.value(size).toStdString().c_str(), "%dx%d", &width, &height) != 2 ||
      width < 200 || height < 150 || width > 8000 || height > 8000) {
    return Fail("--size: expected WxH between 200x150 and 8000x8000, got \"" +
                cli.value(size).toStdString() + "\"");
  }
  const QString v = cli.isSet(view) ? cli.value(view) : (cli.isSet(compare) ? "compare" : "");
  if (v == "timeline")
    w.ShowTab(parallax::gui::MainWindow::kTimelineTab);
  else if (v == "compare")
    w.ShowTab(parallax::gui::MainWindow::kCompareTab);
  else if (v == "plans")
    w.ShowTab(parallax::gui::MainWindow::kPlansTab);
  else if (v == "stats")
    w.ShowTab(parallax::gui::MainWindow::kStatsTab);
  else if (!v.isEmpty())
    return Fail("--view: expected timeline, compare, plans or stats, got \"" + v.toStdString() +
                "\"");
  w.resize(width, height);
  w.show();  // offscreen platform: lays out without a display
  QApplication::processEvents();
  if (cli.isSet(range)) {
    long long a = 0, b = 0;
    if (std::sscanf(cli.value(range).toStdString().c_str(), "%lld:%lld", &a, &b) != 2 || b <= a) {
      return Fail("--range: expected START_NS:END_NS with START < END, got \"" +
                  cli.value(range).toStdString() + "\"");
    }
    auto* tv = v == "compare" ? w.compare_timeline() : w.timeline();
    if (tv->index()) tv->ZoomToRange(tv->index()->first_ns() + a, tv->index()->first_ns() + b);
  } else {
    if (w.timeline()->index()) w.timeline()->FitAll();
    if (w.compare_timeline()->index()) w.compare_timeline()->FitAll();
  }
  if (cli.isSet(select)) {
    auto* tv = v == "compare" ? w.compare_timeline() : w.timeline();
    parallax::gui::SliceSearch search;
    const std::string pattern = cli.value(select).toStdString();
    if (!tv->trace()) return Fail("--select: no timeline is open");
    if (std::string e = search.Set(*tv->trace(), pattern); !e.empty()) return Fail("--select: " + e);
    if (search.matches().empty()) return Fail("--select: no slice name matches \"" + pattern + "\"");
    tv->SelectSlice(search.matches().front());
  }
  QApplication::processEvents();
  const QImage img = w.grab().toImage();
  if (!img.save(cli.value(screenshot), nullptr, 0)) {  // quality 0: the smallest PNG
    return Fail("cannot write " + cli.value(screenshot).toStdString(), 1);
  }
  return 0;
}
