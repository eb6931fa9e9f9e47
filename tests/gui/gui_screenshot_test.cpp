// `parallax-gui --screenshot` on known traces, checked by pixel properties: lanes present,
// slice colours where slices are, nothing blank; and the scripted error contract (exit 2 naming
// the file).
#include <QImage>
#include <QProcess>
#include <QtTest>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "gui/core/compare_state.h"
#include "gui/core/palette.h"
#include "gui/views/scatter_view.h"
#include "gui_test_data.h"
#include "traces/chrome_reader.h"

using namespace parallax;
using namespace parallax::gui;

namespace {

struct Shot {
  int exit_code = -1;
  QString err;
  QImage image;
};

Shot Screenshot(const QString& name, const QStringList& args) {
  const QString out = test::DataDir() + "/" + name + ".png";
  QFile::remove(out);
  QProcess p;
  p.start(PARALLAX_GUI, QStringList{"--screenshot", out, "--size", "1200x700"} + args);
  p.waitForFinished(120000);
  Shot s;
  s.exit_code = p.exitCode();
  s.err = QString::fromUtf8(p.readAllStandardError());
  s.image = QImage(out);
  return s;
}

int CountColor(const QImage& img, QRgb c) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) n += (line[x] | 0xff000000u) == (c | 0xff000000u) ? 1 : 0;
  }
  return n;
}

//! Rows whose pixels across the plot are the lane-header colour.
int LaneHeaderRows(const QImage& img) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    n += img.pixel(img.width() - 40, y) == qRgb(226, 230, 238) &&
         img.pixel(200, y) == qRgb(226, 230, 238);
  return n;
}

//! [first, last] pixel rows of each lane header, top to bottom.
std::vector<std::pair<int, int>> LaneHeaderBands(const QImage& img) {
  std::vector<std::pair<int, int>> bands;
  for (int y = 0; y < img.height(); ++y) {
    if (img.pixel(img.width() - 40, y) != qRgb(226, 230, 238) || img.pixel(200, y) != qRgb(226, 230, 238)) continue;
    if (!bands.empty() && bands.back().second == y - 1) {
      bands.back().second = y;
    } else {
      bands.push_back({y, y});
    }
  }
  return bands;
}

std::set<QRgb> Colors(const QImage& img) {
  std::set<QRgb> s;
  for (int y = 0; y < img.height(); y += 2) {
    for (int x = 0; x < img.width(); x += 2) s.insert(img.pixel(x, y));
  }
  return s;
}

//! This environment without a display and without a chosen Qt platform.
QProcessEnvironment WithoutDisplay() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* k : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(k);
  return env;
}

}  // namespace

class TstGuiScreenshot : public QObject {
  Q_OBJECT
 private slots:
  void timelineOfSimulatedTrace() {
    const QString trace = test::SimulatedTrace();
    // 2 ms from the start: ops are wide enough to be drawn one by one.
    Shot s = Screenshot("timeline", {"--range", "0:300000", trace});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(!s.image.isNull());
    QVERIFY(s.image.width() >= 1200 && s.image.height() >= 700);
    // Two ranks: two lane headers of 18 px each.
    QCOMPARE(LaneHeaderRows(s.image), 2 * 18);
    // The colours of the ops the trace holds appear where slices are drawn.
    auto t = traces::ReadChromeTrace(trace.toStdString());
    QVERIFY(t);
    int names_seen = 0;
    for (const char* n :
         {"qkv", "attn_core", "attn_out", "fc1", "fc2", "tp_allreduce", "act", "attn_norm"}) {
      names_seen += CountColor(s.image, ColorOfName(n)) > 20 ? 1 : 0;
    }
    QVERIFY2(names_seen >= 4, qPrintable(QString::number(names_seen)));
    QVERIFY(Colors(s.image).size() > 30);  // not blank
  }

  void timelineOfKinetoTrace() {
    Shot s = Screenshot("kineto", {test::KinetoTrace()});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(LaneHeaderRows(s.image) >= 18);
    QVERIFY(CountColor(s.image, qRgb(250, 250, 252)) < s.image.width() * s.image.height() * 9 / 10);
    QVERIFY(Colors(s.image).size() > 30);
  }

  void compareView() {
    const QString meas = test::MeasuredTrace();
    if (meas.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    Shot s = Screenshot("compare", {"--compare", test::SimulatedTrace(), meas});
    QCOMPARE(s.exit_code, 0);
    QCOMPARE(LaneHeaderRows(s.image), 4 * 18);  // rank 0/1, predicted/measured
    // Matched slices are filled with their error colour. How far this machine's run is from the
    // prediction is not the test's business (CI machines differ), so any shade counts: red or
    // blue fills at least 15% off (ErrorColor's fade channel below 225).
    int shaded = 0;
    for (int y = 0; y < s.image.height(); ++y) {
      for (int x = 0; x < s.image.width(); ++x) {
        const QRgb c = s.image.pixel(x, y);
        const int r = qRed(c), g = qGreen(c), b = qBlue(c);
        const bool red = r == 235 && g == b && g >= 90 && g < 225;
        const bool blue = b == 235 && r == g && r >= 90 && r < 225;
        shaded += red || blue ? 1 : 0;
      }
    }
    QVERIFY2(shaded > 200, qPrintable(QString::number(shaded)));
    // The worst op (the table's first row, selected) is drawn in the colour of its error: a few
    // pixels at least (its slices may be narrow on a fast machine; 0 when the colour is dropped).
    auto p = traces::ReadChromeTrace(test::SimulatedTrace().toStdString());
    auto m = traces::ReadChromeTrace(meas.toStdString());
    QVERIFY(p && m);
    const CompareState cs(std::move(*p), std::move(*m));
    QVERIFY(!cs.ops().empty());
    const QRgb worst = ErrorColor(cs.ops()[0].rel_error);
    QVERIFY2(CountColor(s.image, worst) > 4,
             qPrintable(QString("%1 px of %2").arg(CountColor(s.image, worst)).arg(worst, 0, 16)));
  }

  void plansView() {
    Shot s = Screenshot("plans", {"--view", "plans", test::CandidatesFile()});
    QCOMPARE(s.exit_code, 0);
    // The memory limit (dashed red) and points in the category colours (blended with alpha).
    QVERIFY(CountColor(s.image, qRgb(200, 30, 30)) > 50);
    int coloured = 0;
    for (QRgb c : Colors(s.image)) {
      const int r = qRed(c), g = qGreen(c), b = qBlue(c);
      coloured += (std::max({r, g, b}) - std::min({r, g, b}) > 60) ? 1 : 0;
    }
    QVERIFY(coloured > 20);
  }

  // A synchronous parameter-server run (2 workers, 1 dedicated server; issue 41): a lane per rank,
  // the server's on rank 2, and with the first push selected its flow arrow from the pushing
  // worker's exchange row (rank 0 or 1) across rank 2's lane header into the server's row.
  void classicModeTraceShowsThePushFlowToTheServer() {
    const QString trace = test::ClassicTrace();
    if (trace.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    const QStringList view = {"--view", "timeline"};
    Shot plain = Screenshot("classic_plain", view + QStringList{trace});
    Shot sel = Screenshot("classic_push", view + QStringList{"--select", "^push$", trace});
    QCOMPARE(plain.exit_code, 0);
    QCOMPARE(sel.exit_code, 0);
    const auto headers = LaneHeaderBands(plain.image);
    QCOMPARE(static_cast<int>(headers.size()), 3);
    constexpr int kPlotX = 176;  // right of the label column (TimelineView::kLabelWidth)
    // Pixels that turn dark when the push is selected: its outline and the arrow.
    int top = plain.image.height(), bottom = -1;
    for (int y = 0; y < plain.image.height(); ++y) {
      for (int x = kPlotX; x < plain.image.width(); ++x) {
        const QRgb a = plain.image.pixel(x, y), b = sel.image.pixel(x, y);
        if (a == b || qRed(b) + qGreen(b) + qBlue(b) > 300) continue;
        top = std::min(top, y);
        bottom = std::max(bottom, y);
      }
    }
    QVERIFY2(top < headers[2].first, qPrintable(QString("dark from %1").arg(top)));  // on rank 0 or 1
    QVERIFY2(bottom > headers[2].second, qPrintable(QString("dark to %1, rank 2 from %2").arg(bottom).arg(headers[2].second)));
  }

  void statsView() {
    Shot s = Screenshot("stats", {"--view", "stats", test::KinetoTrace()});
    QCOMPARE(s.exit_code, 0);
    QVERIFY(CountColor(s.image, qRgb(86, 140, 214)) > 1000);  // compute bar
    QVERIFY(CountColor(s.image, qRgb(235, 120, 70)) > 100);   // exposed communication
  }

  // The memory counters as area charts and the send -> recv arrow of a selected pp_send, on
  // test::FlowsTrace (values known: rank 0 holds 3, 5, 7, 9 GiB after its forward micro-batches).
  void flowsAndCounters() {
    const QString trace = test::FlowsTrace();
    QVERIFY(!trace.isEmpty());
    const QStringList view = {"--view", "timeline", "--range", "0:2600000"};
    Shot plain = Screenshot("flows_plain", view + QStringList{trace});
    Shot sel = Screenshot("flows", view + QStringList{"--select", "pp_send", trace});
    QCOMPARE(plain.exit_code, 0);
    QCOMPARE(sel.exit_code, 0);
    const QImage& img = plain.image;
    constexpr int kPlotX = 176;  // right of the label column (TimelineView::kLabelWidth)

    // Counter fill: QColor(90, 150, 210, 150) over the background (250, 250, 252).
    auto is_fill = [](QRgb c) {
      return std::abs(qRed(c) - 156) <= 3 && std::abs(qGreen(c) - 191) <= 3 &&
             std::abs(qBlue(c) - 227) <= 3;
    };
    // Two charts (one per rank): bands of rows holding fill pixels.
    std::vector<std::pair<int, int>> bands;  // [first, last] row
    for (int y = 0; y < img.height(); ++y) {
      bool any = false;
      for (int x = kPlotX; x < img.width() && !any; x += 3) any = is_fill(img.pixel(x, y));
      if (!any) continue;
      if (!bands.empty() && bands.back().second >= y - 3)
        bands.back().second = y;
      else
        bands.push_back({y, y});
    }
    QCOMPARE(static_cast<int>(bands.size()), 2);
    // Rank 0's chart: per column the filled height. A step chart: the heights are a few levels,
    // proportional to the values (3:5:7:9 GiB, scaled so that 9 GiB fills the 28 px plot).
    std::map<int, int> level_columns;  // height -> columns
    int first_full = -1;
    for (int x = kPlotX; x < img.width() - 4; ++x) {
      int h = 0;
      for (int y = bands[0].first; y <= bands[0].second; ++y) h += is_fill(img.pixel(x, y)) ? 1 : 0;
      ++level_columns[h];
      if (h >= 26 && first_full < 0) first_full = x;
    }
    std::vector<int> levels;  // heights seen over at least 40 columns
    for (auto [h, n] : level_columns)
      if (n >= 40 && h > 0) levels.push_back(h);
    QVERIFY2(levels.size() == 4, qPrintable(QString("levels: %1").arg(levels.size())));
    for (size_t i = 0; i < 4; ++i) {
      const double expected = 28.0 * (3 + 2 * static_cast<double>(i)) / 9.0;
      QVERIFY2(std::abs(levels[i] - expected) <= 2.0,
               qPrintable(QString("level %1: %2 px, expected %3").arg(i).arg(levels[i]).arg(expected)));
    }
    QVERIFY(first_full > img.width() / 2);  // 9 GiB only after the fourth micro-batch starts

    // The arrow: pixels that turn dark when pp_send is selected, within the timeline (above the
    // bottom of the second chart), reach from rank 0's pp-comm row down to rank 1's.
    int top = img.height(), bottom = -1, dark = 0;
    for (int y = 0; y <= bands[1].second; ++y) {
      for (int x = kPlotX; x < img.width(); ++x) {
        const QRgb a = plain.image.pixel(x, y), b = sel.image.pixel(x, y);
        if (a == b || qRed(b) + qGreen(b) + qBlue(b) > 300) continue;
        ++dark;
        top = std::min(top, y);
        bottom = std::max(bottom, y);
      }
    }
    QVERIFY2(bottom - top >= 80, qPrintable(QString("dark span %1..%2").arg(top).arg(bottom)));
    QVERIFY2(bottom < bands[1].first && top < bands[0].first,
             qPrintable(QString("dark span %1..%2").arg(top).arg(bottom)));
    // Its shaft between the rows: dark pixels in most rows of the middle of the span.
    int rows_with_dark = 0;
    for (int y = top + 20; y < bottom - 10; ++y) {
      bool any = false;
      for (int x = kPlotX; x < img.width() && !any; ++x) {
        const QRgb b = sel.image.pixel(x, y);
        any = plain.image.pixel(x, y) != b && qRed(b) + qGreen(b) + qBlue(b) <= 300;
      }
      rows_with_dark += any ? 1 : 0;
    }
    QVERIFY2(rows_with_dark >= (bottom - top - 30) * 9 / 10, qPrintable(QString::number(rows_with_dark)));
    QVERIFY(dark > 60);
  }

  void selectWithoutMatchExitsTwo() {
    Shot s = Screenshot("nomatch", {"--select", "no_such_slice", test::FlowsTrace()});
    QCOMPARE(s.exit_code, 2);
    QVERIFY2(s.err.contains("no_such_slice"), qPrintable(s.err));
  }

  void badFileExitsTwoNamingIt_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::newRow("not json") << QByteArray("garbage");
    QTest::newRow("truncated") << QByteArray("{\"traceEvents\":[{\"ph\":\"X\",");
  }
  void badFileExitsTwoNamingIt() {
    QFETCH(QByteArray, content);
    const QString bad = test::DataDir() + "/broken.json";
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(content);
    f.close();
    Shot s = Screenshot("bad", {bad});
    QCOMPARE(s.exit_code, 2);
    QVERIFY2(s.err.contains(bad), qPrintable(s.err));
    QProcess p;
    p.start(PARALLAX_GUI, {"--benchmark", bad});
    p.waitForFinished(60000);
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains(bad));
  }

  // Without a display Qt's xcb plugin would abort (exit 134); the viewer says what is missing.
  void withoutADisplayTheViewerExitsTwoSayingHowToRenderOffscreen() {
    QProcess p;
    p.setProcessEnvironment(WithoutDisplay());
    p.start(PARALLAX_GUI, {test::SimulatedTrace()});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 2);
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(err.contains("no display found") && err.contains("--screenshot") &&
                 err.contains("QT_QPA_PLATFORM=offscreen"),
             qPrintable(err));
  }
  void withoutADisplayAScreenshotRendersOffscreen() {
    const QString out = test::DataDir() + "/nodisplay.png";
    QFile::remove(out);
    QProcess p;
    p.setProcessEnvironment(WithoutDisplay());
    p.start(PARALLAX_GUI, {"--screenshot", out, "--size", "1200x700", test::SimulatedTrace()});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 0);
    const QImage img(out);
    QCOMPARE(img.width(), 1200);
    QVERIFY(Colors(img).size() > 3);
  }

  void benchmarkPrintsOneJsonObject() {
    QProcess p;
    p.start(PARALLAX_GUI, {"--benchmark", test::SimulatedTrace()});
    p.waitForFinished(120000);
    QCOMPARE(p.exitCode(), 0);
    const QJsonDocument j = QJsonDocument::fromJson(p.readAllStandardOutput());
    QVERIFY(j.isObject());
    for (const char* k : {"slices", "load_s", "first_frame_ms", "frame_ms_p50", "frame_ms_p99",
                          "bytes_per_slice"}) {
      QVERIFY2(j.object().contains(k), k);
    }
    auto t = traces::ReadChromeTrace(test::SimulatedTrace().toStdString());
    QCOMPARE(j.object()["slices"].toInteger(), static_cast<qint64>(t->slices().size()));
  }
};

QTEST_GUILESS_MAIN(TstGuiScreenshot)
#include "gui_screenshot_test.moc"
