hb
workP