// @ts-check
// Starts every widget's script (display/scripts.py puts it first): each render() ends with
// acknowledge(model), so the kernel knows a front end drew the widget (display/presence.py).
//
// Everything our widgets tell the kernel goes as a custom message (model.send), never as
// a state change (model.save_changes): ipykernel 7.4 handles comm messages that arrive
// while a cell awaits without publishing busy/idle status, and ipywidgets' front end
// holds back every later state change of a model until it has seen "idle" for the
// previous one, so a state change sent during the turn would stall that widget for good.

/** Tell the kernel this widget was rendered. @param {WidgetModel} model */
function acknowledge(model) {
  model.send({ type: "rendered" });
}
