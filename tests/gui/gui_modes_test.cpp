// The classic modes view (gui/core/modes_data.h, gui/views/modes_view.h): a compare-modes JSON read
// with errors naming the file and JSON path, and drawn as loss curves and throughput bars.
#include <QPainter>
#include <QProcess>
#include <QtTest>
#include <fstream>
#include <string>

#include "gui/core/modes_data.h"
#include "gui/views/modes_view.h"
#include "gui/views/scatter_view.h"

using namespace parallax::gui;

namespace {

std::string Write(const std::string& name, const std::string& text) {
  QDir().mkpath(GUI_TEST_DIR);
  const std::string path = std::string(GUI_TEST_DIR) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Two modes: all-reduce measured at 2 tokens/s against 4 predicted, backup workers the other way.
const char* kTwoModes = R"({"model": "gpt-tiny", "workers": 2, "inject_slow": "rank=1,factor=3", "modes": [
  {"mode": "allreduce", "losses": [5.5, 5.4, 5.3], "wall_clock_s": [0.1, 0.2, 0.3],
   "predicted_tokens_per_s": 4000, "measured_tokens_per_s": 2000},
  {"mode": "sync=backup:1", "losses": [5.5, 5.45, 5.35], "wall_clock_s": [0.05, 0.1, 0.15],
   "predicted_tokens_per_s": 2000, "measured_tokens_per_s": 4000}]})";

//! Pixels of `color` in the columns [x0, x1) of `img`.
int Count(const QImage& img, QRgb color, int x0, int x1) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = x0; x < x1; ++x) n += img.pixel(x, y) == color ? 1 : 0;
  }
  return n;
}

}  // namespace

class TstGuiModes : public QObject {
  Q_OBJECT
 private slots:
  void readsEveryModesCurvesAndThroughput() {
    auto c = LoadModesComparison(Write("two.json", kTwoModes));
    QVERIFY2(c.ok(), c ? "" : c.error().message.c_str());
    QCOMPARE(c->modes.size(), size_t{2});
    QCOMPARE(c->modes[1].mode, std::string("sync=backup:1"));
    QCOMPARE(c->modes[1].wall_clock_s.back(), 0.15);
    QCOMPARE(c->inject_slow, std::string("rank=1,factor=3"));
    QCOMPARE(LastWallClock(*c), 0.3);
  }

  void namesTheFileAndJsonPathOfABadEntry() {
    std::string bad = kTwoModes;
    bad.replace(bad.find("[0.05, 0.1, 0.15]"), 17, "[0.05]");
    const std::string path = Write("bad.json", bad);
    auto c = LoadModesComparison(path);
    QVERIFY(!c.ok());
    QVERIFY2(c.error().message.find(path + ": /modes/1/wall_clock_s") != std::string::npos, c.error().message.c_str());
    QProcess p;
    p.start(PARALLAX_GUI, {"--modes", QString::fromStdString(path), "--screenshot", QString(GUI_TEST_DIR) + "/x.png"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(p.readAllStandardError().contains("/modes/1/wall_clock_s"));
  }

  void drawsCurvesAndPredictedBesideMeasuredBars() {
    auto c = LoadModesComparison(Write("two.json", kTwoModes));
    QVERIFY(c.ok());
    ModesView v;
    v.SetComparison(std::move(*c));
    QImage img(1200, 500, QImage::Format_RGB32);
    QPainter p(&img);
    v.Paint(p, img.size());
    p.end();
    const QRgb first = CategoryColor(0), second = CategoryColor(1);
    // Both modes' curves in both loss panels (the left two thirds).
    QVERIFY(Count(img, first, 0, 400) > 50 && Count(img, second, 0, 400) > 50);
    QVERIFY(Count(img, first, 400, 800) > 50 && Count(img, second, 400, 800) > 50);
    // Throughput panel: solid measured bars; backup's (4000/s) twice all-reduce's (2000/s).
    const int ar = Count(img, first, 800, 1200), backup = Count(img, second, 800, 1200);
    QVERIFY2(ar > 100 && backup > 1.6 * ar, qPrintable(QString("%1 vs %2").arg(ar).arg(backup)));
  }
};

QTEST_MAIN(TstGuiModes)
#include "gui_modes_test.moc"
