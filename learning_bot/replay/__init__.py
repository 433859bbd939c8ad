"""`learning-bot replay`: a user's own agent logs read into the runs a passive learner would
have recorded, for the projection of what selection would keep and save on that traffic.

- learning_bot.replay.formats: the log shapes read, recognised line by line from the content;
- learning_bot.replay.sessions: requests grouped into conversations (messages that extend one
  another), keeping only each open conversation's current state;
- learning_bot.replay.reader: files streamed into RunRecords, the inventory of tools seen and
  the lines that could not be read.
"""
