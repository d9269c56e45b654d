hb
workP